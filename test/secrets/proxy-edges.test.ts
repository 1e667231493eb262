/**
 * The egress proxy's edges with a host that has a secret, with Node clients on a channel's socket
 * and servers on 127.0.0.1 reached by pinned names: plain HTTP inside a CONNECT (what Node's
 * fetch sends through a proxy for http:// URLs) is served like forwarded HTTP, the request sent
 * with the CONNECT or after its 200; a response whose Transfer-Encoding names a coding other than
 * chunked is a 502 (its body could not be checked); an empty body labelled gzip, deflate or br
 * is an empty body, not a cut connection; a range request asks upstream for identity.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { fileSecretBackend } from '../../executor/secrets/backends';
import { SecretService, startSecretService } from '../../executor/secrets/service';
import { createSecretStore } from '../../executor/secrets/store';
import { loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/log';
import { connectTunnel, Harness, readAll, startHarness } from '../egress/harness';
import { listen, Origins, startOrigins } from './origins';

const KEY = randomBytes(32).toString('hex');
const TOKEN = 'ghs_' + randomBytes(20).toString('hex');
const bearer = { authorization: 'Bearer {{secret:GH_TOKEN}}' };

interface Seen {
  url: string;
  headers: http.IncomingHttpHeaders;
}
const seen: Seen[] = [];

/** /echo: the Authorization echoed; /empty-CODING: nothing, labelled; /range: a 206 of the echo. */
function handler(req: http.IncomingMessage, res: http.ServerResponse): void {
  seen.push({ url: req.url ?? '', headers: req.headers });
  const echo = JSON.stringify({ authorization: req.headers.authorization ?? null });
  const empty = /^\/empty-(.+)$/.exec(decodeURIComponent(req.url ?? ''));
  if (empty) return void res.writeHead(200, { 'content-encoding': empty[1] }).end();
  if (req.url === '/range') return void res.writeHead(206, { 'content-range': `bytes 0-${echo.length - 1}/${echo.length}` }).end(echo);
  res.writeHead(200, { 'content-type': 'application/json', 'x-seen': String(req.headers.authorization ?? '') }).end(echo);
}

/** A raw origin: writes `/path`'s canned response (with the credential it got) and closes. */
function rawOrigin(): net.Server {
  return net.createServer((socket) => {
    let got = '';
    socket.on('data', (c: Buffer) => {
      got += c.toString('latin1');
      if (!got.includes('\r\n\r\n')) return;
      const url = /^[A-Z]+ (\S+)/.exec(got)?.[1] ?? '';
      const auth = /\r\nauthorization: ([^\r]*)/i.exec(got)?.[1] ?? '';
      const body = zlib.gzipSync(`{"authorization":"${auth}"}`);
      const chunked = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]);
      if (url === '/te-gzip')
        socket.end(Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n'), chunked]));
      else if (url === '/empty-close') socket.end('HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nConnection: close\r\n\r\n');
      else socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    });
    socket.on('error', () => undefined);
  });
}

interface Got {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  error?: string;
}

function collect(req: http.ClientRequest): Promise<Got> {
  return new Promise((resolve) => {
    let got: Got | undefined;
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      got = { status: res.statusCode ?? 0, headers: res.headers, body: '' };
      const done = (error?: string) => resolve({ ...(got as Got), body: Buffer.concat(chunks).toString(), ...(error ? { error } : {}) });
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => done());
      res.on('error', (err) => done(err.message));
    });
    req.on('error', (err) => resolve({ ...(got ?? { status: 0, headers: {}, body: '' }), error: err.message }));
    req.end();
  });
}

let h: Harness;
let dir: string;
let service: SecretService;
let origins: Origins;
let raw: net.Server;
let plainPort: number;
let rawPort: number;
let socketPath: string;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-secrets-edges-'));
  origins = await startOrigins(dir, handler);
  plainPort = origins.plainPort;
  raw = rawOrigin();
  rawPort = await listen(raw);
  const data = path.join(dir, 'data');
  const hosts = [origins.tlsPort, plainPort, rawPort].map((p) => `api.git.test:${p}`).join(',');
  await createSecretStore(fileSecretBackend(data), KEY).set('alice', { name: 'GH_TOKEN', host: hosts, value: TOKEN });
  service = await startSecretService({
    config: loadConfig({ TOOLGATE_DATA_DIR: data, TOOLGATE_SECRETS_KEY: KEY, TOOLGATE_EGRESS_CA_FILE: origins.ca.certFile }),
    log: createLogger('silent', 'test', 'json'),
    onUse: () => undefined,
  });
  h = await startHarness({ pins: { 'api.git.test': '127.0.0.1', 'other.test': '127.0.0.1' }, secrets: service.egress });
  await h.store.set('alice', { allow: `${hosts},other.test:${plainPort}` });
  socketPath = (await h.channel('alice')).socketPath;
});

afterAll(async () => {
  await h.close();
  await service.close();
  await origins.close();
  await new Promise((r) => raw.close(r));
  await fs.rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  seen.length = 0;
});

/** GET http://host:port/path through the proxy in absolute form (forward HTTP). */
function viaForward(port: number, urlPath: string, headers: Record<string, string>): Promise<Got> {
  const url = `http://api.git.test:${port}${urlPath}`;
  return collect(http.request({ socketPath, path: url, headers: { host: `api.git.test:${port}`, ...headers }, agent: false }));
}

/** GET /path in the clear inside CONNECT api.git.test:port, sent after the 200 (as Node's fetch does). */
async function viaPlainConnect(port: number, urlPath: string, headers: Record<string, string>): Promise<Got> {
  const tunnel = await connectTunnel(socketPath, `api.git.test:${port}`);
  if (!('socket' in tunnel)) throw new Error(`CONNECT answered ${tunnel.status}`);
  return collect(http.request({ createConnection: () => tunnel.socket, path: urlPath, headers: { host: `api.git.test:${port}`, ...headers } }));
}

type Get = (port: number, urlPath: string, headers: Record<string, string>) => Promise<Got>;
const paths: Array<[string, Get]> = [
  ['forward HTTP', viaForward],
  ['plain HTTP inside CONNECT', viaPlainConnect],
];

describe('plain HTTP inside a CONNECT to a host with a secret', () => {
  it('the server gets the value; the client sees [secret:NAME] in the body and headers', async () => {
    const got = await viaPlainConnect(plainPort, '/echo', bearer);
    expect([got.status, got.error]).toEqual([200, undefined]);
    expect(seen.map((s) => [s.url, s.headers.authorization, s.headers.host])).toEqual([['/echo', `Bearer ${TOKEN}`, `api.git.test:${plainPort}`]]);
    expect(JSON.parse(got.body)).toEqual({ authorization: 'Bearer [secret:GH_TOKEN]' });
    expect(got.headers['x-seen']).toBe('Bearer [secret:GH_TOKEN]');
    expect(JSON.stringify(got)).not.toContain(TOKEN);
  });

  it('a request sent with the CONNECT (before its 200) is served too, and keep-alive requests each go upstream', async () => {
    const socket = net.connect(socketPath);
    const get = `GET /echo HTTP/1.1\r\nhost: api.git.test:${plainPort}\r\nauthorization: Bearer {{secret:GH_TOKEN}}\r\n\r\n`;
    socket.write(
      `CONNECT api.git.test:${plainPort} HTTP/1.1\r\nhost: api.git.test:${plainPort}\r\n\r\n${get}${get.replace('\r\n\r\n', '\r\nconnection: close\r\n\r\n')}`,
    );
    const all = await readAll(socket);
    expect(all.startsWith('HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 OK\r\n')).toBe(true);
    // Two answers, each with the echo redacted (its body in chunks: the redaction holds a tail back).
    expect(all.match(/\r\nHTTP\/1\.1 200 OK\r\n/g)?.length).toBe(2);
    expect(all.match(/x-seen: Bearer \[secret:GH_TOKEN\]\r\n/g)?.length).toBe(2);
    expect(all.match(/Bearer \[secret:GH_TOKEN\]"\}\r\n0\r\n\r\n/g)?.length).toBe(2);
    expect(all).not.toContain(TOKEN);
    expect(seen.map((s) => s.headers.authorization)).toEqual([`Bearer ${TOKEN}`, `Bearer ${TOKEN}`]);
  });

  it('a tunnel closed before any byte releases its connection; the next CONNECT works', async () => {
    const tunnel = await connectTunnel(socketPath, `api.git.test:${plainPort}`);
    if (!('socket' in tunnel)) throw new Error(`CONNECT answered ${tunnel.status}`);
    tunnel.socket.end();
    await new Promise((r) => tunnel.socket.once('close', r));
    const got = await viaPlainConnect(plainPort, '/echo', bearer);
    expect(got.status).toBe(200);
  });
});

describe.each(paths)('a host with a secret, %s', (_name, get) => {
  it('a response with Transfer-Encoding gzip, chunked is a 502 with the reason, and none of its bytes', async () => {
    const got = await get(rawPort, '/te-gzip', bearer);
    expect(got.status).toBe(502);
    expect(got.body).toBe(`toolgate egress: api.git.test:${rawPort} answered with transfer-encoding gzip, chunked, which the proxy cannot check for secrets\n`);
  });

  it.each(['gzip', 'deflate', 'br', 'deflate, gzip'])('an empty chunked body labelled %s arrives as an empty body', async (coding) => {
    const got = await get(plainPort, `/empty-${encodeURIComponent(coding)}`, bearer);
    expect([got.status, got.body, got.error]).toEqual([200, '', undefined]);
    expect(got.headers['content-encoding']).toBeUndefined();
  });

  it('an empty close-delimited body labelled gzip arrives as an empty body', async () => {
    const got = await get(rawPort, '/empty-close', bearer);
    expect([got.status, got.body, got.error]).toEqual([200, '', undefined]);
  });

  it('a range request asks upstream for identity, whatever the client accepts; its answer is redacted', async () => {
    const got = await get(plainPort, '/range', { ...bearer, range: 'bytes=0-', 'accept-encoding': 'gzip, br' });
    expect(seen[0]?.headers['accept-encoding']).toBe('identity');
    expect(seen[0]?.headers.range).toBe('bytes=0-');
    expect(got.status).toBe(206);
    expect(got.body).toBe('{"authorization":"Bearer [secret:GH_TOKEN]"}');
  });
});
