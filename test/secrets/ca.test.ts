/**
 * The executor's certificate authority: made once in the data directory (key 0600 in a 0700
 * directory, kept across starts), leaves for names and addresses that Node's TLS and openssl
 * verify against the CA alone (strict X.509 checks included).
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
  const server = net.createServer((raw) => {
    const s = new tls.TLSSocket(raw, { isServer: true, secureContext: ca.contextFor(host) });
    s.on('error', () => undefined);
    s.on('secure', () => s.end('hi'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

/** The handshake's verdict trusting only the CA, and the leaf as sent. */
async function handshake(ca: CertificateAuthority, host: string, servername?: string): Promise<{ authorized: boolean; pem: string }> {
  const server = await leafServer(ca, host);
  try {
    return await new Promise((resolve, reject) => {
      const port = (server.address() as net.AddressInfo).port;
      const c = tls.connect({ port, host: '127.0.0.1', ...(servername ? { servername } : {}), ca: ca.certPem }, () => {
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
  expect((await loadCertificateAuthority(dir)).certPem).toBe(ca.certPem);
});

it('issues leaves Node verifies for names and for an IP address, cached per host', async () => {
  const ca = await loadCertificateAuthority(dir);
  expect((await handshake(ca, 'api.github.test', 'api.github.test')).authorized).toBe(true);
  expect((await handshake(ca, '127.0.0.1')).authorized).toBe(true);
  await expect(handshake(ca, 'other.test', 'api.github.test')).rejects.toThrow(/altnames/);
  expect(ca.contextFor('a.test')).toBe(ca.contextFor('a.test'));
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
