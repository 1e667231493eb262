/**
 * The upstream servers of the secrets suites: one handler served over plain HTTP and over HTTPS
 * on 127.0.0.1, the HTTPS side with a certificate from its own CA (which the egress proxy
 * trusts only through TOOLGATE_EGRESS_CA_FILE = `ca.certFile`).
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type * as net from 'node:net';
import * as path from 'node:path';
import { CertificateAuthority, loadCertificateAuthority } from '../../executor/secrets/ca';

export interface Origins {
  ca: CertificateAuthority;
  plainPort: number;
  tlsPort: number;
  close(): Promise<void>;
}

export async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as net.AddressInfo).port;
}

/** Serves `handler` on both; the CA lives in `<dir>/upstream`. */
export async function startOrigins(dir: string, handler: http.RequestListener): Promise<Origins> {
  const ca = await loadCertificateAuthority(path.join(dir, 'upstream'), 'test upstream CA');
  const plain = http.createServer(handler);
  const secure = https.createServer({ SNICallback: (name, cb) => void ca.contextFor(name).then((c) => cb(null, c), cb) }, handler);
  const [plainPort, tlsPort] = [await listen(plain), await listen(secure)];
  return {
    ca,
    plainPort,
    tlsPort,
    async close() {
      plain.closeAllConnections();
      secure.closeAllConnections();
      await Promise.all([plain, secure].map((s) => new Promise((r) => s.close(r))));
    },
  };
}
