/**
 * The executor's own certificate authority, with which the egress proxy shows a sandbox a
 * certificate for a host that has a secret (only such hosts are intercepted). Made at the first
 * start with secrets on, in `<data dir>/egress-ca/`: `ca.crt` (what sandboxes trust) and
 * `ca.key` (mode 0600, in a 0700 directory; never bind-mounted or copied into a sandbox).
 * Leaf certificates are made per host on first use and kept in memory until near expiry.
 *
 * Certificates are built by @peculiar/x509 (ECDSA P-256, SHA-256, signed through WebCrypto) with
 * the extensions strict verifiers ask for (basic constraints, key usage, subject and authority
 * key identifiers, subject alternative name, server auth). Keys stay node:crypto KeyObjects on
 * disk and for TLS; only the CA's signing key is imported into WebCrypto.
 */
// @peculiar/x509 keeps its algorithms in a tsyringe container, which throws at load without the
// Reflect.getMetadata polyfill: this import must run before the library's.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createPrivateKey, generateKeyPairSync, KeyObject, webcrypto, X509Certificate } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { isIP } from 'node:net';
import * as path from 'node:path';
import { createSecureContext, SecureContext } from 'node:tls';
import { writeAtomically } from '../write-atomically';

type CryptoKey = webcrypto.CryptoKey;

export interface CertificateAuthority {
  /** The CA certificate (PEM) file a sandbox trusts. */
  readonly certFile: string;
  readonly certPem: string;
  /**
   * A TLS server context with a leaf for `host` (a name or an IP address). Cached per host, the
   * promise included: concurrent first requests for one host make one leaf.
   */
  contextFor(host: string): Promise<SecureContext>;
}

const DAY = 86_400_000;
const LEAF_DAYS = 30;
const CA_DAYS = 3650;
const MAX_LEAVES = 1000;
const P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING = { name: 'ECDSA', hash: 'SHA-256' } as const;

// Node's own WebCrypto, so signing never depends on which global `crypto` the process (or a test environment) has.
x509.cryptoProvider.set(webcrypto);

// A UTF8String CN, as the certificates made before this library had: a reloaded CA's name matches byte for byte.
const commonName = (cn: string) => new x509.Name([{ '2.5.4.3': [{ utf8String: cn }] }]);

/** KeyObject.toCryptoKey is Node 22+; PKCS#8 through importKey works on Node 20 too. */
const signingKey = (key: KeyObject): Promise<CryptoKey> =>
  webcrypto.subtle.importKey('pkcs8', key.export({ type: 'pkcs8', format: 'der' }), P256, false, ['sign']);

interface Issuer {
  name: x509.Name;
  key: CryptoKey;
  /** The issuer's subject key identifier (hex): a leaf's authority key identifier must equal it. */
  keyId: string;
}

/** A certified key as the certificate carries it: its SubjectPublicKeyInfo and identifier, worked out once. */
interface CertifiedKey {
  spki: Buffer;
  ski: x509.SubjectKeyIdentifierExtension;
}

async function certifiedKey(publicKey: KeyObject): Promise<CertifiedKey> {
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return { spki: der, ski: await x509.SubjectKeyIdentifierExtension.create(der) };
}

/** A certificate (PEM) for `key`, signed by `issuer` (the CA itself for the CA's own). */
async function issue(subject: x509.Name, key: CertifiedKey, issuer: Issuer, days: number, extensions: x509.Extension[]) {
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.create({
    // No serialNumber: the library draws 16 random bytes and encodes them as a positive INTEGER.
    subject,
    issuer: issuer.name,
    notBefore: new Date(now - DAY),
    notAfter: new Date(now + days * DAY),
    publicKey: key.spki,
    signingKey: issuer.key,
    signingAlgorithm: SIGNING,
    extensions: [...extensions, key.ski, new x509.AuthorityKeyIdentifierExtension(issuer.keyId)],
  });
  return cert.toString('pem') + '\n';
}

const caExtensions = () => [
  new x509.BasicConstraintsExtension(true, 0, true),
  new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
];

const leafExtensions = (host: string) => [
  new x509.BasicConstraintsExtension(false, undefined, true),
  new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
  new x509.SubjectAlternativeNameExtension([{ type: isIP(host) ? 'ip' : 'dns', value: host }]),
  new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
];

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
    const own = await certifiedKey(pair.publicKey);
    const self: Issuer = { name: commonName(label), key: await signingKey(key), keyId: own.ski.keyId };
    certPem = await issue(self.name, own, self, CA_DAYS, caExtensions());
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    await fs.chmod(dir, 0o700);
    await writeAtomically(keyFile, key.export({ type: 'pkcs8', format: 'pem' }), 0o600);
    await writeAtomically(certFile, certPem, 0o644);
  }
  const caCert = new x509.X509Certificate(certPem);
  const issuer: Issuer = {
    name: caCert.subjectName,
    key: await signingKey(key),
    keyId: caCert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId ?? (await x509.SubjectKeyIdentifierExtension.create(caCert.publicKey)).keyId,
  };
  // One leaf key for every host: a leaf is as strong as the CA that signs it, and making a key per host costs time.
  const leafKey = p256();
  const leafPem = leafKey.privateKey.export({ type: 'pkcs8', format: 'pem' });
  const leafPublic = await certifiedKey(leafKey.publicKey);
  const leaves = new Map<string, { context: Promise<SecureContext>; until: number }>();
  const make = async (host: string) => {
    const cert = await issue(commonName(host), leafPublic, issuer, LEAF_DAYS, leafExtensions(host));
    return createSecureContext({ key: leafPem, cert: cert + certPem });
  };
  return {
    certFile,
    certPem,
    contextFor(host) {
      const cached = leaves.get(host);
      if (cached && cached.until > Date.now()) return cached.context;
      const context = make(host);
      if (leaves.size >= MAX_LEAVES) leaves.delete(leaves.keys().next().value!);
      const entry = { context, until: Date.now() + (LEAF_DAYS - 1) * DAY };
      leaves.set(host, entry);
      // A failure is not kept: the next request for the host tries again.
      context.catch(() => leaves.get(host) === entry && leaves.delete(host));
      return context;
    },
  };
}
