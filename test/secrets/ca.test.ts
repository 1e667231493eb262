/**
 * The executor's certificate authority: made once in the data directory (key 0600 in a 0700
 * directory, kept across starts), leaves for names and addresses (v4 and v6) that Node's TLS and
 * openssl verify against the CA alone (strict X.509 checks included), with the extensions those
 * checks rest on.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tls from 'node:tls';
import { CertificateAuthority, loadCertificateAuthority } from '../../executor/secrets/ca';
import { hasCommand, itIf } from '../helpers/availability';

let dir: string;
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-ca-'));
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

/** A TLS server on 127.0.0.1 showing the leaf for `host` (as the proxy shows it: a TLSSocket with that context). */
async function leafServer(ca: CertificateAuthority, host: string): Promise<net.Server> {
  const secureContext = await ca.contextFor(host);
  const server = net.createServer((raw) => {
    const s = new tls.TLSSocket(raw, { isServer: true, secureContext });
    s.on('error', () => undefined);
    s.on('secure', () => s.end('hi'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

/** The handshake's verdict trusting only the CA, and the leaf as sent. */
async function handshake(ca: CertificateAuthority, host: string, servername?: string, check = true): Promise<{ authorized: boolean; pem: string }> {
  const server = await leafServer(ca, host);
  try {
    return await new Promise((resolve, reject) => {
      const port = (server.address() as net.AddressInfo).port;
      const c = tls.connect({ port, host: '127.0.0.1', ...(servername ? { servername } : {}), ca: ca.certPem, rejectUnauthorized: check }, () => {
        resolve({ authorized: c.authorized, pem: c.getPeerX509Certificate()!.toString() });
        c.destroy();
      });
      c.on('error', reject);
    });
  } finally {
    server.close();
  }
}

it('is made once with a private key only its owner reads, and kept across starts', async () => {
  const ca = await loadCertificateAuthority(dir);
  expect((await fs.stat(path.join(dir, 'egress-ca', 'ca.key'))).mode & 0o777).toBe(0o600);
  expect((await fs.stat(path.join(dir, 'egress-ca'))).mode & 0o777).toBe(0o700);
  const cert = new X509Certificate(ca.certPem);
  expect(cert.ca).toBe(true);
  const files = async () => Promise.all(['ca.crt', 'ca.key'].map((f) => fs.readFile(path.join(dir, 'egress-ca', f), 'utf8')));
  const before = await files();
  expect(before[0]).toBe(ca.certPem);
  const again = await loadCertificateAuthority(dir);
  expect(again.certPem).toBe(ca.certPem);
  expect(await files()).toEqual(before);
  // A leaf from the reloaded CA is issued by the CA on disk.
  const leaf = new X509Certificate((await handshake(again, 'after.restart.test', 'after.restart.test')).pem);
  expect(leaf.checkIssued(cert)).toBe(true);
  expect(leaf.verify(cert.publicKey)).toBe(true);
});

it('issues leaves Node verifies for names and for an IP address, cached per host', async () => {
  const ca = await loadCertificateAuthority(dir);
  expect((await handshake(ca, 'api.github.test', 'api.github.test')).authorized).toBe(true);
  expect((await handshake(ca, '127.0.0.1')).authorized).toBe(true);
  await expect(handshake(ca, 'other.test', 'api.github.test')).rejects.toThrow(/altnames/);
  expect(ca.contextFor('a.test')).toBe(ca.contextFor('a.test'));
  const [one, two] = await Promise.all([ca.contextFor('b.test'), ca.contextFor('b.test')]);
  expect(one).toBe(two);
  expect(await ca.contextFor('b.test')).toBe(one);
});

it('puts a name, an IPv4 or an IPv6 address in the leaf as the subject alternative name the client checks', async () => {
  const ca = await loadCertificateAuthority(dir);
  const issuer = new X509Certificate(ca.certPem);
  const leaf = async (host: string) => new X509Certificate((await handshake(ca, host, undefined, false)).pem);
  const name = await leaf('api.github.test');
  expect(name.subjectAltName).toBe('DNS:api.github.test');
  expect(name.checkHost('api.github.test')).toBe('api.github.test');
  const v4 = await leaf('127.0.0.1');
  expect(v4.subjectAltName).toBe('IP Address:127.0.0.1');
  expect(v4.checkIP('127.0.0.1')).toBe('127.0.0.1');
  const v6 = await leaf('2001:db8::1');
  expect(v6.subjectAltName).toBe('IP Address:2001:DB8:0:0:0:0:0:1');
  expect(v6.checkIP('2001:db8::1')).toBe('2001:db8::1');
  expect(v6.checkIP('2001:db8::2')).toBeUndefined();
  for (const cert of [name, v4, v6]) {
    expect(cert.ca).toBe(false);
    expect(cert.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']); // Node lists the extended key usage here: serverAuth.
    expect(cert.checkIssued(issuer)).toBe(true);
    expect(cert.verify(issuer.publicKey)).toBe(true);
    expect(BigInt('0x' + cert.serialNumber)).toBeGreaterThan(0n);
  }
  expect(new Set([name, v4, v6].map((c) => c.serialNumber)).size).toBe(3);
});

itIf(hasCommand('openssl'), 'needs openssl', 'passes openssl verify -x509_strict as a server certificate', async () => {
  const ca = await loadCertificateAuthority(dir);
  const { pem } = await handshake(ca, 'git.example.test', 'git.example.test');
  await fs.writeFile(path.join(dir, 'leaf.pem'), pem);
  const out = execFileSync('openssl', ['verify', '-x509_strict', '-purpose', 'sslserver', '-CAfile', ca.certFile, path.join(dir, 'leaf.pem')], {
    encoding: 'utf8',
  });
  expect(out).toContain(': OK');
});

itIf(hasCommand('openssl'), 'needs openssl', 'marks the CA and the leaf with the extensions strict verifiers rest on', async () => {
  const ca = await loadCertificateAuthority(dir);
  const text = (pem: string) => execFileSync('openssl', ['x509', '-noout', '-text'], { input: pem, encoding: 'utf8' }).replace(/\s+/g, ' ');
  const root = text(ca.certPem);
  expect(root).toContain('Signature Algorithm: ecdsa-with-SHA256');
  expect(root).toContain('NIST CURVE: P-256');
  expect(root).toContain('X509v3 Basic Constraints: critical CA:TRUE, pathlen:0');
  expect(root).toContain('X509v3 Key Usage: critical Certificate Sign, CRL Sign');
  const rootKeyId = /X509v3 Subject Key Identifier: ([0-9A-F:]+)/.exec(root)?.[1];
  expect(rootKeyId).toBeDefined();
  expect(root).toMatch(new RegExp(`X509v3 Authority Key Identifier: (keyid:)?${rootKeyId}`));
  const leaf = text((await handshake(ca, 'git.example.test', 'git.example.test')).pem);
  expect(leaf).toContain('X509v3 Basic Constraints: critical CA:FALSE');
  expect(leaf).toContain('X509v3 Key Usage: critical Digital Signature');
  expect(leaf).toContain('X509v3 Extended Key Usage: TLS Web Server Authentication');
  expect(leaf).toContain('X509v3 Subject Alternative Name: DNS:git.example.test');
  expect(leaf).toMatch(/X509v3 Subject Key Identifier: [0-9A-F:]+/);
  expect(leaf).toMatch(new RegExp(`X509v3 Authority Key Identifier: (keyid:)?${rootKeyId}`));
  const days = (from: string, to: string) => (Date.parse(to) - Date.parse(from)) / 86_400_000;
  const issuer = new X509Certificate(ca.certPem);
  expect(days(issuer.validFrom, issuer.validTo)).toBe(3651); // ten years, from a day back
  const cert = new X509Certificate((await handshake(ca, 'git.example.test', 'git.example.test')).pem);
  expect(days(cert.validFrom, cert.validTo)).toBe(31); // a day back, 30 ahead
  expect(Date.now() - Date.parse(cert.validFrom)).toBeGreaterThan(86_400_000 - 60_000);
});
