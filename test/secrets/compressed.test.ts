/**
 * Compressed response bodies through the egress proxy, with Node clients on a channel's socket
 * and real servers on 127.0.0.1 reached by pinned names: a host with a secret that echoes the
 * credential in a gzip, br, deflate (zlib and raw), two-coding or dribbled body, over plain HTTP
 * forwarding and over intercepted HTTPS. The client gets the body decoded with `[secret:NAME]`,
 * never the value; upstream is asked only for codings the proxy decodes; any other coding is a
 * 502 and a body that fails to decode cuts the connection. A host without a secret gets the
 * client's own Accept-Encoding and its compressed bytes pass untouched.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tls from 'node:tls';
import * as zlib from 'node:zlib';
import { fileSecretBackend } from '../../executor/secrets/backends';
import type { CertificateAuthority } from '../../executor/secrets/ca';
import { SecretService, startSecretService } from '../../executor/secrets/service';
import { createSecretStore } from '../../executor/secrets/store';
import { loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/log';
import { connectTunnel, Harness, startHarness } from '../egress/harness';
import { collect, Got, Origins, startOrigins } from './origins';

const KEY = randomBytes(32).toString('hex');
const TOKEN = 'ghs_' + randomBytes(20).toString('hex');
const ASKED = 'zstd, br;q=0.9, gzip;q=0.8, *;q=0.1';

/** The body each path sends, compressed as the path says; what the server wrote is kept to compare. */
const ENCODE: Record<string, { label: string; encode(b: Buffer): Buffer }> = {
  gzip: { label: 'gzip', encode: (b) => zlib.gzipSync(b) },
  xgzip: { label: 'x-gzip', encode: (b) => zlib.gzipSync(b) },
  br: { label: 'br', encode: (b) => zlib.brotliCompressSync(b) },
  deflate: { label: 'deflate', encode: (b) => zlib.deflateSync(b) },
  raw: { label: 'deflate', encode: (b) => zlib.deflateRawSync(b) },
  // Applied in the order listed: deflate first, then gzip.
  two: { label: 'deflate, gzip', encode: (b) => zlib.gzipSync(zlib.deflateSync(b)) },
  split: { label: 'gzip', encode: (b) => zlib.gzipSync(b) },
  big: { label: 'deflate', encode: (b) => zlib.deflateRawSync(b) },
  zstd: { label: 'zstd', encode: (b) => b },
  bad: { label: 'gzip', encode: (b) => Buffer.concat([Buffer.from('not gzip at all '), b]) },
};

interface Seen {
  url: string;
  headers: http.IncomingHttpHeaders;
  sent?: Buffer;
}

function handler(seen: Seen[]) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    const entry: Seen = { url: req.url ?? '', headers: req.headers };
    seen.push(entry);
    const kind = (req.url ?? '').slice(1).split('?')[0] ?? '';
    if (kind === 'not-modified') return void res.writeHead(304, { 'content-encoding': 'gzip', etag: '"1"' }).end();
    const spec = ENCODE[kind];
    if (!spec) return void res.writeHead(404).end();
    // The credential at both ends and across the middle of a long body, so it straddles chunks.
    const pad = 'x'.repeat(kind === 'big' ? 8 << 20 : 3000);
    const text = `{"authorization":"${req.headers.authorization ?? ''}","pad":"${pad}${req.headers.authorization ?? ''}"}`;
    const sent = spec.encode(Buffer.from(text));
    entry.sent = sent;
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': spec.label, 'content-length': sent.length });
    if (req.method === 'HEAD') return void res.end();
    if (kind !== 'split') return void res.end(sent);
    let at = 0;
    const dribble = () => {
      if (at >= sent.length) return void res.end();
      res.write(sent.subarray(at, (at += 5)));
      setImmediate(dribble);
    };
    dribble();
  };
}

let h: Harness;
let dir: string;
let service: SecretService;
let origins: Origins;
let upstreamCa: CertificateAuthority;
let plainPort: number;
let tlsPort: number;
let socketPath: string;
const seen: Seen[] = [];

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-secrets-compressed-'));
  origins = await startOrigins(dir, handler(seen));
  ({ ca: upstreamCa, plainPort, tlsPort } = origins);
  const data = path.join(dir, 'data');
  await createSecretStore(fileSecretBackend(data), KEY).set('alice', {
    name: 'GH_TOKEN',
    host: `api.git.test:${tlsPort},api.git.test:${plainPort}`,
    value: TOKEN,
  });
  service = await startSecretService({
    config: loadConfig({ TOOLGATE_DATA_DIR: data, TOOLGATE_SECRETS_KEY: KEY, TOOLGATE_EGRESS_CA_FILE: upstreamCa.certFile }),
    log: createLogger('silent', 'test', 'json'),
    onUse: () => undefined,
  });
  h = await startHarness({ pins: { 'api.git.test': '127.0.0.1', 'other.test': '127.0.0.1' }, secrets: service.egress });
  await h.store.set('alice', { allow: `api.git.test:${tlsPort},api.git.test:${plainPort},other.test:${plainPort}` });
  socketPath = (await h.channel('alice')).socketPath;
});

afterAll(async () => {
  await h.close();
  await service.close();
  await origins.close();
  await fs.rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  seen.length = 0;
});

const bearer = { authorization: 'Bearer {{secret:GH_TOKEN}}' };

/** GET http://host:port/kind through the proxy (forward HTTP). */
function viaForward(host: string, kind: string, headers: Record<string, string>, method = 'GET'): Promise<Got> {
  const url = `http://${host}:${plainPort}/${kind}`;
  return collect(http.request({ socketPath, path: url, method, headers: { host: new URL(url).host, ...headers }, agent: false }));
}

/** GET https://api.git.test:port/kind through a CONNECT the proxy intercepts (trusting its CA). */
async function viaConnect(kind: string, headers: Record<string, string>, method = 'GET'): Promise<Got> {
  const tunnel = await connectTunnel(socketPath, `api.git.test:${tlsPort}`);
  if (!('socket' in tunnel)) throw new Error(`CONNECT answered ${tunnel.status}`);
  const secure = tls.connect({ socket: tunnel.socket, servername: 'api.git.test', ca: await fs.readFile(service.caCertFile as string) });
  return collect(http.request({ createConnection: () => secure, path: `/${kind}`, method, headers: { host: `api.git.test:${tlsPort}`, ...headers } }));
}

type Get = (kind: string, headers: Record<string, string>, method?: string) => Promise<Got>;
const paths: Array<[string, Get, () => number]> = [
  ['forward HTTP', (kind, headers, method) => viaForward('api.git.test', kind, headers, method), () => plainPort],
  ['intercepted HTTPS', viaConnect, () => tlsPort],
];

describe.each(paths)('a host with a secret, %s', (_name, get, port) => {
  it.each(['gzip', 'xgzip', 'br', 'deflate', 'raw', 'two', 'split'])('a %s body arrives decoded, with [secret:NAME] and never the value', async (kind) => {
    const got = await get(kind, { ...bearer, 'accept-encoding': ASKED });
    expect(got.error).toBeUndefined();
    expect(got.status).toBe(200);
    expect(seen[0]?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(seen[0]?.headers['accept-encoding']).toBe('br;q=0.9, gzip;q=0.8');
    expect(got.headers['content-encoding']).toBeUndefined();
    expect(got.headers['content-length']).toBeUndefined();
    const body = got.body.toString();
    expect(JSON.parse(body)).toEqual({ authorization: 'Bearer [secret:GH_TOKEN]', pad: `${'x'.repeat(3000)}Bearer [secret:GH_TOKEN]` });
    expect(body).not.toContain(TOKEN);
  });

  it('a body that expands to 8 MiB arrives whole', async () => {
    const got = await get('big', bearer);
    expect(got.error).toBeUndefined();
    expect(got.body.length).toBe(Buffer.byteLength(`{"authorization":"Bearer [secret:GH_TOKEN]","pad":"Bearer [secret:GH_TOKEN]"}`) + (8 << 20));
    expect(got.body.subarray(-40).toString()).toBe(`${'x'.repeat(40 - 26)}Bearer [secret:GH_TOKEN]"}`);
  });

  it('a client that names no decodable coding (or no Accept-Encoding at all) makes the proxy ask for identity', async () => {
    await get('gzip', { ...bearer, 'accept-encoding': 'zstd, compress' });
    await get('gzip', bearer);
    expect(seen.map((s) => s.headers['accept-encoding'])).toEqual(['identity', 'identity']);
  });

  it('a body in a coding the proxy cannot decode is a 502 with the reason, and none of its bytes', async () => {
    const got = await get('zstd', { ...bearer, 'accept-encoding': ASKED });
    expect(got.status).toBe(502);
    expect(got.body.toString()).toBe(`toolgate egress: api.git.test:${port()} answered with content-encoding zstd, which the proxy cannot check for secrets\n`);
  });

  it('a body that fails to decode cuts the connection: the raw bytes never arrive', async () => {
    const got = await get('bad', bearer);
    expect(got.error).toBeDefined();
    expect(got.body.toString()).not.toContain(TOKEN);
    expect(got.body.toString()).not.toContain('not gzip');
  });

  it('HEAD and 304 answers (no body) pass, their decodable label dropped as the GET would', async () => {
    const head = await get('gzip', bearer, 'HEAD');
    expect([head.status, head.error]).toEqual([200, undefined]);
    expect(head.headers['content-encoding']).toBeUndefined();
    expect(head.body.length).toBe(0);
    const notModified = await get('not-modified', bearer);
    expect([notModified.status, notModified.error]).toEqual([304, undefined]);
    expect(notModified.headers.etag).toBe('"1"');
    const headZstd = await get('zstd', bearer, 'HEAD');
    expect([headZstd.status, headZstd.error]).toEqual([200, undefined]);
    expect(headZstd.headers['content-encoding']).toBe('zstd');
  });
});

it('a host without a secret gets the client own Accept-Encoding, and its gzip body passes byte for byte', async () => {
  const got = await viaForward('other.test', 'gzip', { ...bearer, 'accept-encoding': ASKED });
  expect(got.status).toBe(200);
  expect(seen[0]?.headers['accept-encoding']).toBe(ASKED);
  expect(seen[0]?.headers.authorization).toBe('Bearer {{secret:GH_TOKEN}}');
  expect(got.headers['content-encoding']).toBe('gzip');
  expect(got.headers['content-length']).toBe(String(seen[0]?.sent?.length));
  expect(got.body.equals(seen[0]?.sent as Buffer)).toBe(true);
  const zstd = await viaForward('other.test', 'zstd', { 'accept-encoding': 'zstd' });
  expect(zstd.status).toBe(200);
  expect(zstd.headers['content-encoding']).toBe('zstd');
});
