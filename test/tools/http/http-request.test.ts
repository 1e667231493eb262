/**
 * http_request against real HTTP servers on 127.0.0.1, allowed through TOOLGATE_HTTP_ALLOW-style
 * entries. The guard's refusals have their own suite in test/security/ssrf.test.ts.
 */
import * as zlib from 'node:zlib';
import { ALL_TOOLS } from '../../../shared/tools/index';
import { callHttp, httpServer, outputOf, TestServer, textOf } from './loopback';

let a: TestServer;
let b: TestServer;
let allow: string[];
/** Resolves when the /hang route has a request waiting. */
let hanging: () => void = () => undefined;

const ROUTES = async (): Promise<TestServer> =>
  httpServer((req, res, body) => {
    const url = new URL(req.url ?? '/', 'http://x');
    switch (url.pathname) {
      case '/text':
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'x-multi': ['one', 'two'] });
        return void res.end('héllo wörld');
      case '/json':
        res.writeHead(201, { 'content-type': 'application/json' });
        return void res.end('{"ok":true}');
      case '/binary':
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        return void res.end(Buffer.from([0, 1, 2, 254, 255]));
      case '/latin1':
        res.writeHead(200, { 'content-type': 'text/plain; charset=iso-8859-1' });
        return void res.end(Buffer.from([0x63, 0x61, 0x66, 0xe9]));
      case '/gzip':
        res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' });
        return void res.end(zlib.gzipSync('compressed'));
      case '/accents':
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
        return void res.end('éééé');
      case '/endless': {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const chunk = Buffer.alloc(16 * 1024, 'x');
        const pump = () => {
          while (!res.destroyed && res.write(chunk));
          if (!res.destroyed) res.once('drain', pump);
        };
        res.on('close', () => undefined);
        return void pump();
      }
      case '/echo':
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify({ method: req.method, headers: req.headers, body: body.toString('base64') }));
      case '/status':
        res.writeHead(Number(url.searchParams.get('code')), { 'content-type': 'text/plain' });
        return void res.end('status body');
      case '/redirect':
        res.writeHead(Number(url.searchParams.get('code') ?? 302), { location: url.searchParams.get('to') ?? '/text' });
        return void res.end('moved');
      case '/loop':
        res.writeHead(302, { location: '/loop' });
        return void res.end();
      case '/hang':
        hanging();
        return; // never answers
      default:
        res.writeHead(404);
        res.end();
    }
  });

beforeAll(async () => {
  a = await ROUTES();
  b = await ROUTES();
  allow = [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`];
});
afterAll(async () => {
  await a.close();
  await b.close();
});
beforeEach(() => {
  a.seen.length = 0;
  b.seen.length = 0;
});

describe('http_request', () => {
  it('is registered with the network:http permission, runs trusted, and declares its hints', () => {
    const tool = ALL_TOOLS.find((t) => t.name === 'http_request');
    expect(tool).toBeDefined();
    expect(tool?.permission).toBe('network:http');
    expect(tool?.host).toBe('trusted');
    expect(tool?.annotations).toEqual({ readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true });
  });

  it('returns status, headers and a text body with a readable summary', async () => {
    const result = await callHttp({ url: `${a.url}/text` }, { allow });
    const out = outputOf(result);
    expect(out).toMatchObject({
      status: 200,
      statusText: 'OK',
      body: 'héllo wörld',
      bodyEncoding: 'utf8',
      truncated: false,
      url: `${a.url}/text`,
      redirects: [],
    });
    expect(out.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(out.headers['x-multi']).toEqual(['one', 'two']);
    expect(textOf(result)).toContain(`HTTP 200 OK — GET ${a.url}/text`);
    expect(textOf(result)).toContain('héllo wörld');
    expect(a.seen[0]?.headers['user-agent']).toMatch(/^toolgate\//);
  });

  it('returns JSON as text and keeps non-2xx statuses as normal results', async () => {
    expect(outputOf(await callHttp({ url: `${a.url}/json` }, { allow }))).toMatchObject({ status: 201, body: '{"ok":true}', bodyEncoding: 'utf8' });
    const notFound = await callHttp({ url: `${a.url}/status?code=404` }, { allow });
    expect(notFound.isError).toBeUndefined();
    expect(outputOf(notFound)).toMatchObject({ status: 404, statusText: 'Not Found', body: 'status body' });
    expect(outputOf(await callHttp({ url: `${a.url}/status?code=503` }, { allow })).status).toBe(503);
  });

  it('returns binary and compressed bodies as base64, and decodes other charsets', async () => {
    expect(outputOf(await callHttp({ url: `${a.url}/binary` }, { allow }))).toMatchObject({
      body: Buffer.from([0, 1, 2, 254, 255]).toString('base64'),
      bodyEncoding: 'base64',
    });
    const gz = outputOf(await callHttp({ url: `${a.url}/gzip`, headers: { 'Accept-Encoding': 'gzip' } }, { allow }));
    expect(gz.bodyEncoding).toBe('base64');
    expect(zlib.gunzipSync(Buffer.from(gz.body, 'base64')).toString()).toBe('compressed');
    expect(outputOf(await callHttp({ url: `${a.url}/latin1` }, { allow })).body).toBe('café');
  });

  it('sends the method, headers and a text or base64 body', async () => {
    const text = outputOf(
      await callHttp({ url: `${a.url}/echo`, method: 'post', headers: { 'X-Token': 'abc', 'Content-Type': 'text/plain' }, body: 'payload' }, { allow }),
    );
    const echoed = JSON.parse(text.body) as { method: string; headers: Record<string, string>; body: string };
    expect(echoed.method).toBe('POST');
    expect(echoed.headers['x-token']).toBe('abc');
    expect(Buffer.from(echoed.body, 'base64').toString()).toBe('payload');

    const bin = outputOf(await callHttp({ url: `${a.url}/echo`, method: 'PUT', body_base64: Buffer.from([0, 255, 7]).toString('base64') }, { allow }));
    expect(Buffer.from((JSON.parse(bin.body) as { body: string }).body, 'base64')).toEqual(Buffer.from([0, 255, 7]));
  });

  it('answers HEAD with headers and an empty body', async () => {
    expect(outputOf(await callHttp({ url: `${a.url}/text`, method: 'HEAD' }, { allow }))).toMatchObject({ status: 200, body: '', truncated: false });
  });

  it('stops reading at max_bytes and says so, even when the body never ends', async () => {
    const out = outputOf(await callHttp({ url: `${a.url}/endless`, max_bytes: 100_000 }, { allow }));
    expect(out.truncated).toBe(true);
    expect(out.body).toBe('x'.repeat(100_000));
  });

  it('uses the configured byte limit by default and does not split a character', async () => {
    const out = outputOf(await callHttp({ url: `${a.url}/accents` }, { allow, limits: { httpMaxBytes: 5 } }));
    expect(out).toMatchObject({ body: 'éé', truncated: true });
  });

  it('refuses max_bytes and timeout_ms above the server limits', async () => {
    const big = await callHttp({ url: `${a.url}/text`, max_bytes: 11 }, { allow, limits: { httpMaxBytes: 10 } });
    expect(big.isError).toBe(true);
    expect(textOf(big)).toContain("max_bytes must be at most 10 (the server's limit, TOOLGATE_HTTP_MAX_BYTES)");
    const slow = await callHttp({ url: `${a.url}/text`, timeout_ms: 5000 }, { allow, limits: { httpMaxTimeoutMs: 1000 } });
    expect(textOf(slow)).toContain('timeout_ms must be at most 1000');
    expect(a.seen).toHaveLength(0);
  });

  it('follows redirects, reporting each hop and the final URL', async () => {
    const out = outputOf(await callHttp({ url: `${a.url}/redirect?to=${encodeURIComponent(`${b.url}/text`)}` }, { allow }));
    expect(out).toMatchObject({ status: 200, body: 'héllo wörld', url: `${b.url}/text`, redirects: [`${b.url}/text`] });
  });

  it('returns the redirect itself when follow_redirects is false', async () => {
    const out = outputOf(await callHttp({ url: `${a.url}/redirect?to=/json`, follow_redirects: false }, { allow }));
    expect(out).toMatchObject({ status: 302, body: 'moved', redirects: [] });
    expect(out.headers.location).toBe('/json');
    expect(a.seen).toHaveLength(1);
  });

  it('stops after the configured number of redirects', async () => {
    const result = await callHttp({ url: `${a.url}/loop` }, { allow, limits: { httpMaxRedirects: 3 } });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('Too many redirects: stopped after 3 (TOOLGATE_HTTP_MAX_REDIRECTS)');
    expect(a.seen).toHaveLength(4);
  });

  it('drops credentials on a redirect to another origin, and keeps them on the same origin', async () => {
    const headers = { Authorization: 'Bearer secret', Cookie: 'sid=1', 'X-Other': 'kept' };
    await callHttp({ url: `${a.url}/redirect?to=${encodeURIComponent(`${b.url}/echo`)}`, headers }, { allow });
    expect(b.seen[0]?.headers).toMatchObject({ 'x-other': 'kept' });
    expect(b.seen[0]?.headers.authorization).toBeUndefined();
    expect(b.seen[0]?.headers.cookie).toBeUndefined();

    await callHttp({ url: `${a.url}/redirect?to=/echo`, headers }, { allow });
    expect(a.seen[1]?.headers).toMatchObject({ authorization: 'Bearer secret', cookie: 'sid=1' });
  });

  it('turns a POST into a body-less GET on 303, and keeps method and body on 307', async () => {
    await callHttp({ url: `${a.url}/redirect?code=303&to=/echo`, method: 'POST', body: 'data', headers: { 'content-type': 'text/plain' } }, { allow });
    expect(a.seen[1]).toMatchObject({ method: 'GET', body: Buffer.alloc(0) });
    expect(a.seen[1]?.headers['content-type']).toBeUndefined();
    await callHttp({ url: `${a.url}/redirect?code=307&to=/echo`, method: 'POST', body: 'data' }, { allow });
    expect(a.seen[3]).toMatchObject({ method: 'POST', body: Buffer.from('data') });
  });

  it('refuses redirects to other schemes', async () => {
    for (const to of ['file:///etc/passwd', 'ftp://127.0.0.1/', 'gopher://127.0.0.1:70/']) {
      const result = await callHttp({ url: `${a.url}/redirect?to=${encodeURIComponent(to)}` }, { allow });
      expect(textOf(result)).toContain('Only http and https URLs are supported');
    }
  });

  it('times out as a tool error', async () => {
    const result = await callHttp({ url: `${a.url}/hang`, timeout_ms: 300 }, { allow });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe(`Timed out after 300 ms waiting for 127.0.0.1:${a.port}`);
  });

  it('stops when the call is cancelled', async () => {
    const controller = new AbortController();
    hanging = () => controller.abort();
    const result = await callHttp({ url: `${a.url}/hang` }, { allow, signal: controller.signal });
    expect(textOf(result)).toBe('The request was cancelled');
  });

  it('reports a closed port on an allowed address as connection refused', async () => {
    const closed = await ROUTES();
    await closed.close();
    const result = await callHttp({ url: `${closed.url}/` }, { allow: ['127.0.0.1/32'] });
    expect(textOf(result)).toBe(`Connection refused by 127.0.0.1:${closed.port}`);
  });

  it('is opened by a CIDR entry and by a localhost:port entry', async () => {
    expect(outputOf(await callHttp({ url: `${a.url}/json` }, { allow: ['127.0.0.0/8'] })).status).toBe(201);
    expect(outputOf(await callHttp({ url: `http://localhost:${a.port}/json` }, { allow: [`localhost:${a.port}`] })).status).toBe(201);
  });

  it.each([
    [{ url: 'not a url' }, 'url is not a valid absolute URL'],
    [{ url: '/relative' }, 'url is not a valid absolute URL'],
    [{ url: 'file:///etc/passwd' }, 'Only http and https URLs are supported, not file'],
    [{ url: 'http://user:pw@127.0.0.1/' }, 'URLs with credentials'],
    [{ url: 'http://127.0.0.1/', body: 'a', body_base64: 'YQ==' }, 'Give body or body_base64, not both'],
    [{ url: 'http://127.0.0.1/', body_base64: 'not base64!' }, 'body_base64 is not valid base64'],
    [{ url: 'http://127.0.0.1/', method: 'CONNECT' }, 'The CONNECT method is not supported'],
  ])('refuses bad arguments before any request: %p', async (args, message) => {
    const result = await callHttp(args, { allow: ['127.0.0.0/8'] });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain(message);
  });

  it('refuses a request body over the limit', async () => {
    const result = await callHttp({ url: `${a.url}/echo`, method: 'POST', body: 'x'.repeat(11) }, { allow, limits: { maxWriteBytes: 10 } });
    expect(textOf(result)).toContain('The request body is 11 bytes; the limit is 10 (TOOLGATE_MAX_WRITE_BYTES)');
    expect(a.seen).toHaveLength(0);
  });

  it('reports an invalid header as a tool error', async () => {
    const result = await callHttp({ url: `${a.url}/echo`, headers: { 'X-Bad': 'a\r\nInjected: 1' } }, { allow });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('Invalid request');
    expect(a.seen).toHaveLength(0);
  });
});
