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

/** A response as a client got it; `error` set when the exchange failed or was cut before its end. */
export interface Got {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  error?: string;
}

/** Sends `req` (ending it) and collects its response, whatever happens to it. */
export function collect(req: http.ClientRequest): Promise<Got> {
  return new Promise((resolve) => {
    let got: Got | undefined;
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      got = { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.alloc(0) };
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ ...(got as Got), body: Buffer.concat(chunks) }));
      res.on('error', (err) => resolve({ ...(got as Got), body: Buffer.concat(chunks), error: err.message }));
    });
    req.on('error', (err) => resolve({ ...(got ?? { status: 0, headers: {} }), body: got?.body ?? Buffer.alloc(0), error: err.message }));
    req.end();
  });
}
