/**
 * http_request with the caller's secrets, against HTTP servers on 127.0.0.1 reached by name
 * through a test resolver: the server receives the value only on the secret's host; the model
 * sees a placeholder or `[secret:NAME]`, never the value; another host, another tenant, a
 * redirect off the host, and a store the key does not open are each refused or stripped.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { startSecretService, SecretService } from '../../executor/secrets/service';
import { createSecretStore } from '../../executor/secrets/store';
import { fileSecretBackend } from '../../executor/secrets/backends';
import { loadConfig } from '../../shared/config';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { createLogger } from '../../shared/log';
import type { SecretUsedEvent } from '../../shared/secrets/broker';
import { httpRequest } from '../../shared/tools/http/http-request';
import { createHttpPolicy } from '../../shared/tools/http/policy';
import { LocalToolRunner } from '../../shared/tools/local-runner';
import type { AnyTool, ToolResult } from '../../shared/tools/tool';
import { httpServer, TestServer } from '../tools/http/loopback';

const KEY = randomBytes(32).toString('hex');
const VALUE = 'tok_' + randomBytes(20).toString('hex');
const OTHER_VALUE = 'key_' + randomBytes(20).toString('hex');
const PORTLESS_VALUE = 'pls_' + randomBytes(20).toString('hex');
// Fixed, letters only: a 4-character piece of it cannot turn up by chance in a port, a date or a length.
const GH_VALUE = 'ghs_QxZvKwJpYfBmNtRcLdHsGkWqPjTx';
const GH_B64 = Buffer.from(GH_VALUE).toString('base64');

let dir: string;
let api: TestServer;
let other: TestServer;
let service: SecretService;
const events: SecretUsedEvent[] = [];

/** Paths that echo the Authorization header in a compressed body: the label and the encoder. */
const COMPRESS: Record<string, [string, (b: Buffer) => Buffer]> = {
  gzip: ['gzip', (b) => zlib.gzipSync(b)],
  br: ['br', (b) => zlib.brotliCompressSync(b)],
  deflate: ['deflate', (b) => zlib.deflateSync(b)],
  raw: ['deflate', (b) => zlib.deflateRawSync(b)],
  zstd: ['zstd', (b) => b],
  bad: ['gzip', (b) => Buffer.concat([Buffer.from('not gzip '), b])],
};

const echo = (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => {
  const url = new URL(req.url ?? '/', 'http://x');
  if (url.pathname === '/redirect') {
    res.writeHead(302, { location: url.searchParams.get('to') ?? '/' });
    return void res.end();
  }
  const compress = COMPRESS[url.pathname.slice(1)];
  if (compress) {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': compress[0] });
    return void res.end(compress[1](Buffer.from(JSON.stringify({ authorization: req.headers.authorization ?? null, pad: 'x'.repeat(2000) }))));
  }
  if (url.pathname === '/reflect') {
    // The value twice (the second one lies further on than the redacted text is long) and in base64.
    const auth = String(req.headers.authorization);
    res.writeHead(200, { 'content-type': 'text/plain' });
    return void res.end(`auth=${auth}; again=${auth}; b64=${Buffer.from(auth.slice(7)).toString('base64')}; end\n`);
  }
  if (url.pathname === '/te-gzip') {
    // A compressed transfer coding: the client undoes chunked only, the body stays gzip.
    res.writeHead(200, { 'content-type': 'text/plain', 'transfer-encoding': 'gzip, chunked' });
    return void res.end(zlib.gzipSync(Buffer.from(`auth=${String(req.headers.authorization)}\n`)));
  }
  if (url.pathname === '/binary') {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    return void res.end(Buffer.concat([Buffer.from([0, 255]), Buffer.from(String(req.headers.authorization))]));
  }
  res.writeHead(200, { 'content-type': 'application/json', 'x-echo': String(req.headers.authorization ?? '') });
  res.end(JSON.stringify({ headers: req.headers }));
};

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-secrets-http-'));
  api = await httpServer((req, res) => echo(req, res));
  other = await httpServer((req, res) => echo(req, res));
  const store = createSecretStore(fileSecretBackend(dir), KEY);
  await store.set('alice', { name: 'API_TOKEN', host: `api.test:${api.port}`, value: VALUE });
  await store.set('carol', { name: 'GH_TOKEN', host: `api.test:${api.port}`, value: GH_VALUE });
  await store.set('alice', { name: 'AUTO_KEY', host: `api.test:${api.port}`, header: 'X-Api-Key: k={value}', value: OTHER_VALUE });
  // A rule without a port: api.test on 80 and 443, one secret by placeholder, one by template.
  await store.set('dave', { name: 'PLAIN_TOKEN', host: 'api.test', value: PORTLESS_VALUE });
  await store.set('dave', { name: 'PLAIN_KEY', host: 'api.test', header: 'X-Api-Key: {value}', value: OTHER_VALUE });
  service = await startSecretService({
    config: loadConfig({ TOOLGATE_DATA_DIR: dir, TOOLGATE_SECRETS_KEY: KEY }),
    log: createLogger('silent', 'test', 'json'),
    onUse: (e) => events.push(e),
  });
});
afterAll(async () => {
  await service.close();
  await Promise.all([api.close(), other.close()]);
  await fs.rm(dir, { recursive: true, force: true });
});
beforeEach(() => {
  api.seen.length = 0;
  other.seen.length = 0;
  events.length = 0;
});

async function call(tenant: string, args: Record<string, unknown>, broker = service.broker): Promise<ToolResult> {
  const http = createHttpPolicy([`api.test:${api.port}`, `other.test:${other.port}`], { resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
  const runner = new LocalToolRunner({
    trusted: { limits: DEFAULT_LIMITS, http, secrets: broker },
    onUnexpectedError: (err) => {
      throw err;
    },
  });
  return runner.run(
    httpRequest as unknown as AnyTool,
    httpRequest.input.parse(args),
    { tenant, permissions: new Set(['network:http']) },
    new AbortController().signal,
  );
}

const apiUrl = (p = '/echo') => `http://api.test:${api.port}${p}`;
const otherUrl = (p = '/echo') => `http://other.test:${other.port}${p}`;
const shown = (r: ToolResult) => JSON.stringify(r);

it('sends the value to the secret host, adds header templates, and shows the model only [secret:NAME]', async () => {
  const result = await call('alice', { url: apiUrl(), headers: { Authorization: 'Bearer {{secret:API_TOKEN}}' } });
  expect(result.isError).toBeUndefined();
  expect(api.seen[0]?.headers.authorization).toBe(`Bearer ${VALUE}`);
  expect(api.seen[0]?.headers['x-api-key']).toBe(`k=${OTHER_VALUE}`);
  expect(shown(result)).not.toContain(VALUE);
  expect(shown(result)).not.toContain(OTHER_VALUE);
  expect(shown(result)).toContain('Bearer [secret:API_TOKEN]');
  expect(shown(result)).toContain('k=[secret:AUTO_KEY]');
  expect(events.map(({ tenant, name, host, port, tool }) => ({ tenant, name, host, port, tool }))).toEqual(
    expect.arrayContaining([
      { tenant: 'alice', name: 'API_TOKEN', host: 'api.test', port: api.port, tool: 'http_request' },
      { tenant: 'alice', name: 'AUTO_KEY', host: 'api.test', port: api.port, tool: 'http_request' },
    ]),
  );
  expect(JSON.stringify(events)).not.toContain(VALUE);
});

it('redacts a value from a binary body before it is base64-encoded', async () => {
  const result = await call('alice', { url: apiUrl('/binary'), headers: { Authorization: '{{secret:API_TOKEN}}' } });
  const body = Buffer.from(String(result.structuredContent?.body), 'base64').toString('latin1');
  expect(body).toContain('[secret:API_TOKEN]');
  expect(body).not.toContain(VALUE);
});

it.each(['gzip', 'br', 'deflate', 'raw'])('decodes a %s body from the secret host (undici request does not) before redacting it', async (kind) => {
  const result = await call('alice', {
    url: apiUrl(`/${kind}`),
    headers: { Authorization: 'Bearer {{secret:API_TOKEN}}', 'Accept-Encoding': 'zstd, gzip, br' },
  });
  expect(result.isError).toBeUndefined();
  expect(api.seen[0]?.headers['accept-encoding']).toBe('gzip, br');
  expect(result.structuredContent).toMatchObject({ bodyEncoding: 'utf8' });
  expect(JSON.parse(String(result.structuredContent?.body))).toMatchObject({ authorization: 'Bearer [secret:API_TOKEN]' });
  expect((result.structuredContent?.headers as Record<string, unknown>)['content-encoding']).toBeUndefined();
  expect(shown(result)).not.toContain(VALUE);
});

it('asks the secret host for identity when the caller names no decodable coding; refuses a body in another coding, or one that does not decode', async () => {
  const result = await call('alice', { url: apiUrl('/zstd'), headers: { Authorization: 'Bearer {{secret:API_TOKEN}}' } });
  expect(api.seen[0]?.headers['accept-encoding']).toBe('identity');
  expect(result.isError).toBe(true);
  expect(shown(result)).toContain(`api.test:${api.port} answered with content-encoding zstd, which http_request cannot check for secrets`);
  expect(shown(result)).not.toContain(VALUE);
  const bad = await call('alice', { url: apiUrl('/bad'), headers: { Authorization: 'Bearer {{secret:API_TOKEN}}' } });
  expect(bad.isError).toBe(true);
  expect(shown(bad)).toContain(`The body from api.test:${api.port} does not decode as its content-encoding says`);
  expect(shown(bad)).not.toContain(VALUE);
  // Another host (no secret bound there): the caller's Accept-Encoding as written, the body as sent.
  const elsewhere = await call('alice', { url: otherUrl('/gzip'), headers: { 'Accept-Encoding': 'zstd, gzip' } });
  expect(other.seen[0]?.headers['accept-encoding']).toBe('zstd, gzip');
  expect(elsewhere.structuredContent).toMatchObject({ bodyEncoding: 'base64', headers: { 'content-encoding': 'gzip' } });
});

/** Every piece of `value` at least `min` characters long. */
const pieces = (value: string, min = 4): string[] =>
  Array.from({ length: value.length - min + 1 }, (_, i) => Array.from({ length: value.length - i - min + 1 }, (_, n) => value.slice(i, i + min + n))).flat();

it('never lets max_bytes cut a value (or its base64 form) so that a piece of it reaches the model; truncated says where the body was cut', async () => {
  const headers = { Authorization: 'Bearer {{secret:GH_TOKEN}}' };
  const whole = await call('carol', { url: apiUrl('/reflect'), headers });
  const full = String(whole.structuredContent?.body);
  expect(full).toBe('auth=Bearer [secret:GH_TOKEN]; again=Bearer [secret:GH_TOKEN]; b64=[secret:GH_TOKEN]=; end\n');
  const raw = `auth=Bearer ${GH_VALUE}; again=Bearer ${GH_VALUE}; b64=${GH_B64}; end\n`;
  const secretPieces = [...pieces(GH_VALUE), ...pieces(GH_B64.replace(/=+$/, ''))];
  const first = raw.indexOf(GH_VALUE);
  for (let max = first - 2; max <= raw.length + 2; max++) {
    const result = await call('carol', { url: apiUrl('/reflect'), headers, max_bytes: max });
    const text = shown(result);
    const { body, truncated } = result.structuredContent as { body: string; truncated: boolean };
    // What the model got is a prefix of the redacted body, within the cap, and says whether it is all of it.
    const seen = { max, leaked: secretPieces.find((piece) => text.includes(piece)), prefix: full.startsWith(body), within: body.length <= max, truncated };
    expect(seen).toEqual({ max, leaked: undefined, prefix: true, within: true, truncated: body !== full });
  }
  expect(api.seen.every((r) => r.headers.authorization === `Bearer ${GH_VALUE}`)).toBe(true);
});

it('refuses a body in a compressed transfer coding from the secret host (it cannot be checked)', async () => {
  const te = await call('alice', { url: apiUrl('/te-gzip'), headers: { Authorization: 'Bearer {{secret:API_TOKEN}}' } });
  expect(te.isError).toBe(true);
  expect(shown(te)).toContain(`api.test:${api.port} answered with transfer-encoding gzip, chunked, which http_request cannot check for secrets`);
  expect(shown(te)).not.toContain(VALUE);
});

it('drops Range and If-Range for a host a secret is bound to (windows through a value would escape redaction); keeps them elsewhere', async () => {
  const ranged = { Range: 'bytes=10-', 'If-Range': '"v1"', 'Accept-Encoding': 'gzip' };
  const result = await call('alice', { url: apiUrl('/gzip'), headers: { Authorization: 'Bearer {{secret:API_TOKEN}}', ...ranged } });
  expect(result.isError).toBeUndefined();
  expect(api.seen[0]?.headers).not.toHaveProperty('range');
  expect(api.seen[0]?.headers).not.toHaveProperty('if-range');
  // The whole body, so the caller's decodable coding is asked for (a range would have needed identity).
  expect(api.seen[0]?.headers['accept-encoding']).toBe('gzip');
  expect(JSON.parse(String(result.structuredContent?.body))).toMatchObject({ authorization: 'Bearer [secret:API_TOKEN]' });
  // A template alone binds the host too (alice's AUTO_KEY): still no Range.
  await call('alice', { url: apiUrl(), headers: ranged });
  expect(api.seen[1]?.headers).not.toHaveProperty('range');
  await call('alice', { url: otherUrl(), headers: ranged });
  expect(other.seen[0]?.headers).toMatchObject({ range: 'bytes=10-', 'if-range': '"v1"' });
});

it('refuses a caller Host (any case, duplicated) or a header like it on a request that carries a secret, sending nothing', async () => {
  const auth = { Authorization: 'Bearer {{secret:API_TOKEN}}' };
  const routed: Array<Record<string, string>> = [
    { Host: 'evil.example' },
    { hOsT: 'evil.example' },
    { Host: `api.test:${api.port}`, host: 'evil.example' },
    { 'X-Forwarded-Host': 'evil.example' },
    { Forwarded: 'host=evil.example' },
  ];
  for (const headers of routed) {
    const result = await call('alice', { url: apiUrl(), headers: { ...headers, ...auth } });
    expect({ headers, isError: result.isError }).toEqual({ headers, isError: true });
    expect(shown(result)).toMatch(/Refused: a request that carries API_TOKEN, AUTO_KEY may not set (host|x-forwarded-host|forwarded) \(a shared host/);
  }
  // A header template alone carries a value too.
  const templated = await call('alice', { url: apiUrl(), headers: { Host: 'evil.example' } });
  expect(shown(templated)).toContain('Refused: a request that carries AUTO_KEY may not set host');
  // undici would refuse a pseudo-header itself (not a token); it is refused before that, as routing.
  const authority = await call('alice', { url: apiUrl(), headers: { ':authority': 'evil.example', ...auth } });
  expect(shown(authority)).toContain('may not set :authority');
  expect(api.seen).toEqual([]);
  expect(events).toEqual([]);
  // No value in the request (carol's secret is bound here but not asked for; bob has none): Host goes as given.
  for (const tenant of ['carol', 'bob']) expect((await call(tenant, { url: apiUrl(), headers: { Host: 'evil.example' } })).isError).toBeUndefined();
  expect(api.seen.map((r) => r.headers.host)).toEqual(['evil.example', 'evil.example']);
});

it('sends a secret to port 443 only over https: http://host:443 is refused before anything is sent, a redirect there too', async () => {
  const placeholder = await call('dave', { url: 'http://api.test:443/x', headers: { Authorization: 'Bearer {{secret:PLAIN_TOKEN}}' } });
  expect(placeholder.isError).toBe(true);
  expect(shown(placeholder)).toContain('Refused: PLAIN_TOKEN, PLAIN_KEY would be sent in cleartext to api.test:443; a secret goes to port 443 only over https');
  // The template alone, on a redirect from a host where dave has no secret.
  const redirected = await call('dave', { url: apiUrl(`/redirect?to=${encodeURIComponent('http://api.test:443/x')}`) });
  expect(redirected.isError).toBe(true);
  expect(shown(redirected)).toContain('Refused: PLAIN_KEY would be sent in cleartext to api.test:443');
  expect(api.seen).toHaveLength(1);
  expect(events).toEqual([]);
  // https to 443 passes this check (and is then refused by the SSRF guard: nothing listens there).
  const tls = await call('dave', { url: 'https://api.test/x', headers: { Authorization: 'Bearer {{secret:PLAIN_TOKEN}}' } });
  expect(shown(tls)).toContain('Refused: api.test resolves to 127.0.0.1 (loopback), which is not allowed');
  expect(shown(tls)).not.toContain(PORTLESS_VALUE);
});

it('refuses a placeholder for another host, an unknown name, and another tenant, sending nothing', async () => {
  const elsewhere = await call('alice', { url: otherUrl(), headers: { Authorization: 'Bearer {{secret:API_TOKEN}}' } });
  expect(elsewhere.isError).toBe(true);
  expect(shown(elsewhere)).toContain(`{{secret:API_TOKEN}} may only be sent to api.test:${api.port}, not to other.test:${other.port}`);
  const unknown = await call('alice', { url: apiUrl(), headers: { 'X-T': '{{secret:NOPE}}' } });
  expect(shown(unknown)).toContain('this identity has no secret named NOPE');
  const bob = await call('bob', { url: apiUrl(), headers: { Authorization: 'Bearer {{secret:API_TOKEN}}' } });
  expect(bob.isError).toBe(true);
  expect(shown(bob)).toContain('no secret named API_TOKEN');
  expect(api.seen.length + other.seen.length).toBe(0);
  expect(events).toEqual([]);
});

it('never lets a value follow a redirect to another host (custom headers and templates included)', async () => {
  const result = await call('alice', {
    url: apiUrl(`/redirect?to=${encodeURIComponent(otherUrl())}`),
    headers: { 'X-Token': '{{secret:API_TOKEN}}', Authorization: 'Bearer {{secret:API_TOKEN}}' },
  });
  expect(result.isError).toBeUndefined();
  expect(api.seen[0]?.headers['x-token']).toBe(VALUE);
  const landed = JSON.stringify(other.seen);
  expect(landed).not.toContain(VALUE);
  expect(landed).not.toContain(OTHER_VALUE);
  expect(landed).not.toContain('{{secret:');
});

it('with a key that does not open the store: a placeholder is refused with the reason, a plain request still works', async () => {
  const wrong = await startSecretService({
    config: loadConfig({ TOOLGATE_DATA_DIR: dir, TOOLGATE_SECRETS_KEY: randomBytes(32).toString('base64') }),
    log: createLogger('silent', 'test', 'json'),
    onUse: (e) => events.push(e),
  });
  // It started (a refusal of secret use, not a crash) and will not intercept anything.
  expect(wrong.egress).toBeUndefined();
  const refused = await call('alice', { url: apiUrl(), headers: { Authorization: 'Bearer {{secret:API_TOKEN}}' } }, wrong.broker);
  expect(refused.isError).toBe(true);
  expect(shown(refused)).toContain('TOOLGATE_SECRETS_KEY does not open the secret store');
  expect((await call('alice', { url: apiUrl() }, wrong.broker)).isError).toBeUndefined();
  expect(api.seen).toHaveLength(1);
  expect(api.seen[0]?.headers.authorization).toBeUndefined();
  await wrong.close();
});

it('a run_command gets each secret name as a variable holding its placeholder; the caller’s own env wins', async () => {
  expect(await service.commandArgs('alice', 'run_command', { command: 'env', env: { AUTO_KEY: 'mine' } })).toEqual({
    command: 'env',
    env: { API_TOKEN: '{{secret:API_TOKEN}}', AUTO_KEY: 'mine' },
  });
  expect(await service.commandArgs('bob', 'run_command', { command: 'env' })).toEqual({ command: 'env' });
  expect(await service.commandArgs('alice', 'read_file', { path: 'x' })).toEqual({ path: 'x' });
});
