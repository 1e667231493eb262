/**
 * The executor's own certificate authority, with which the egress proxy shows a sandbox a
 * certificate for a host that has a secret (only such hosts are intercepted). Made at the first
 * start with secrets on, in `<data dir>/egress-ca/`: `ca.crt` (what sandboxes trust) and
 * `ca.key` (mode 0600, in a 0700 directory; never bind-mounted or copied into a sandbox).
 * Leaf certificates are made per host on first use and kept in memory until near expiry.
 *
 * Certificates are written with node:crypto (ECDSA P-256, SHA-256) and a minimal DER writer
 * (der.ts): RFC 5280 fields and the extensions strict verifiers ask for (basic constraints, key
 * usage, subject and authority key identifiers, subject alternative name, server auth).
 */
import { createHash, createPrivateKey, generateKeyPairSync, KeyObject, randomBytes, sign, X509Certificate } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { isIP } from 'node:net';
import * as path from 'node:path';
import { createSecureContext, SecureContext } from 'node:tls';
import * as der from './der';

export interface CertificateAuthority {
  /** The CA certificate (PEM) file a sandbox trusts. */
  readonly certFile: string;
  readonly certPem: string;
  /** A TLS server context with a leaf for `host` (a name or an IP address), cached. */
  contextFor(host: string): SecureContext;
}

const ECDSA_SHA256 = der.sequence(der.oid('1.2.840.10045.4.3.2'));
const DAY = 86_400_000;
const LEAF_DAYS = 30;

const name = (cn: string) => der.sequence(der.set(der.sequence(der.oid('2.5.4.3'), der.utf8String(cn))));
const extension = (id: string, critical: boolean, value: Buffer) => der.sequence(der.oid(id), ...(critical ? [der.boolean(true)] : []), der.octetString(value));
const keyId = (key: KeyObject) =>
  createHash('sha1')
    .update(key.export({ type: 'spki', format: 'der' }))
    .digest();

interface CertSpec {
  subject: string;
  publicKey: KeyObject;
  issuer: string;
  issuerKey: KeyObject;
  /** The issuer's public key, for the authority key identifier. */
  issuerPublic: KeyObject;
  days: number;
  ca: boolean;
  host?: string;
}

function certificate(spec: CertSpec): string {
  const now = Date.now();
  const exts = [
    extension('2.5.29.19', true, spec.ca ? der.sequence(der.boolean(true), der.smallInteger(0)) : der.sequence()),
    // keyCertSign + cRLSign for the CA, digitalSignature for a leaf.
    extension('2.5.29.15', true, spec.ca ? der.bitString(Buffer.from([0x06]), 1) : der.bitString(Buffer.from([0x80]), 7)),
    extension('2.5.29.14', false, der.octetString(keyId(spec.publicKey))),
    extension('2.5.29.35', false, der.sequence(der.implicit(0, keyId(spec.issuerPublic)))),
  ];
  if (spec.host !== undefined) {
    const ip = isIP(spec.host);
    const alt = ip ? der.implicit(7, ipBytes(spec.host, ip)) : der.implicit(2, Buffer.from(spec.host, 'ascii'));
    exts.push(extension('2.5.29.17', false, der.sequence(alt)), extension('2.5.29.37', false, der.sequence(der.oid('1.3.6.1.5.5.7.3.1'))));
  }
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f;
  const tbs = der.sequence(
    der.explicit(0, der.smallInteger(2)),
    der.unsignedInteger(serial),
    ECDSA_SHA256,
    name(spec.issuer),
    der.sequence(der.time(new Date(now - DAY)), der.time(new Date(now + spec.days * DAY))),
    name(spec.subject),
    spec.publicKey.export({ type: 'spki', format: 'der' }),
    der.explicit(3, der.sequence(...exts)),
  );
  const signature = sign('sha256', tbs, spec.issuerKey);
  const cert = der.sequence(tbs, ECDSA_SHA256, der.bitString(signature));
  return `-----BEGIN CERTIFICATE-----\n${cert.toString('base64').replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`;
}

function ipBytes(address: string, family: number): Buffer {
  if (family === 4) return Buffer.from(address.split('.').map(Number));
  const [head = '', tail = ''] = address.split('::');
  const groups = (s: string) => (s === '' ? [] : s.split(':'));
  const h = groups(head);
  const t = address.includes('::') ? groups(tail) : [];
  const all = [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return Buffer.concat(all.map((g) => Buffer.from(g.padStart(4, '0'), 'hex')));
}

const p256 = () => generateKeyPairSync('ec', { namedCurve: 'P-256' });

/** Loads the CA from `<dataDir>/egress-ca/`, making it on first use. */
export async function loadCertificateAuthority(dataDir: string, label = 'toolgate egress CA'): Promise<CertificateAuthority> {
  const dir = path.join(dataDir, 'egress-ca');
  const certFile = path.join(dir, 'ca.crt');
  const keyFile = path.join(dir, 'ca.key');
  let certPem: string;
  let key: KeyObject;
  try {
    [certPem, key] = [await fs.readFile(certFile, 'utf8'), createPrivateKey(await fs.readFile(keyFile, 'utf8'))];
    if (Date.parse(new X509Certificate(certPem).validTo) - Date.now() < 2 * LEAF_DAYS * DAY) throw new Error('the CA is about to expire');
  } catch {
    const pair = p256();
    key = pair.privateKey;
    certPem = certificate({ subject: label, publicKey: pair.publicKey, issuer: label, issuerKey: key, issuerPublic: pair.publicKey, days: 3650, ca: true });
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    await fs.chmod(dir, 0o700);
    const tmp = `${keyFile}.${process.pid}.tmp`;
    await fs.writeFile(tmp, key.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    await fs.rename(tmp, keyFile);
    await fs.writeFile(`${certFile}.${process.pid}.tmp`, certPem, { mode: 0o644 });
    await fs.rename(`${certFile}.${process.pid}.tmp`, certFile);
  }
  const caPublic = new X509Certificate(certPem).publicKey;
  const issuer = new X509Certificate(certPem).subject.replace(/^CN=/, '');
  // One leaf key for every host: a leaf is as strong as the CA that signs it, and making a key per host costs time.
  const leafKey = p256();
  const leafPem = leafKey.privateKey.export({ type: 'pkcs8', format: 'pem' });
  const leaves = new Map<string, { context: SecureContext; until: number }>();
  return {
    certFile,
    certPem,
    contextFor(host) {
      const cached = leaves.get(host);
      if (cached && cached.until > Date.now()) return cached.context;
      const cert = certificate({
        subject: host,
        publicKey: leafKey.publicKey,
        issuer,
        issuerKey: key,
        issuerPublic: caPublic,
        days: LEAF_DAYS,
        ca: false,
        host,
      });
      const context = createSecureContext({ key: leafPem, cert: cert + certPem });
      if (leaves.size >= 1000) leaves.delete(leaves.keys().next().value!);
      leaves.set(host, { context, until: Date.now() + (LEAF_DAYS - 1) * DAY });
      return context;
    },
  };
}
