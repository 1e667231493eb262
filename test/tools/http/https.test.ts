/**
 * HTTPS through the guarded connector: the connection goes to the vetted address, but TLS
 * still sends the URL's name as SNI and verifies the certificate (a self-signed one fails).
 */
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as https from 'node:https';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { callHttp, textOf } from './loopback';

let dir: string;
let server: https.Server | undefined;
let port = 0;
const sniSeen: string[] = [];
let skip = '';

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-https-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        'key.pem',
        '-out',
        'cert.pem',
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost',
      ],
      { cwd: dir, stdio: 'ignore' },
    );
  } catch {
    skip = 'openssl is not available to make a test certificate';
    console.warn(`https.test: skipped, ${skip}`);
    return;
  }
  server = https.createServer(
    {
      key: await fs.readFile(path.join(dir, 'key.pem')),
      cert: await fs.readFile(path.join(dir, 'cert.pem')),
      // Called during the handshake with the name the client sent; undefined keeps the default context.
      SNICallback: (name, cb) => {
        sniSeen.push(name);
        cb(null, undefined);
      },
    },
    (_req, res) => res.end('secret'),
  );
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  port = (server.address() as net.AddressInfo).port;
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await fs.rm(dir, { recursive: true, force: true });
});

it('sends the host name as SNI and refuses a certificate it cannot verify', async () => {
  if (skip) return; // reason printed in beforeAll
  const result = await callHttp({ url: `https://localhost:${port}/` }, { allow: [`localhost:${port}`] });
  expect(result.isError).toBe(true);
  expect(textOf(result)).toMatch(new RegExp(`^TLS failed with localhost:${port}: .*self[- ]signed`));
  expect(sniSeen).toEqual(['localhost']);
});
