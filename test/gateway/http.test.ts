/**
 * The HTTP transport's rules (spec §4, the README's Protocol section) over a real socket: the spec's exact request,
 * JSON-RPC semantics over POST, and each HTTP status the gateway can answer.
 */
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { json, RpcReply, startTestGateway, TestGateway } from './harness';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ env: { TOOLGATE_MAX_MESSAGE_BYTES: String(64 * 1024) } });
});
afterAll(async () => {
  await gw?.close();
});

/** A raw HTTP/1.1 request, for what fetch will not send (chunked bodies, odd headers). */
function raw(
  options: http.RequestOptions,
  body?: (req: http.ClientRequest) => void,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const url = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: '/', ...options }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    if (body) body(req);
    else req.end();
  });
}

describe('the spec §4 request', () => {
  test('POST / with Bearer + Content-Type (no Accept) and tools/list answers application/json with the tools', async () => {
    const res = await fetch(gw.url, {
      method: 'POST',
      headers: { Authorization: `Bearer ${gw.token()}`, 'Content-Type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}',
    });
    expect(res.status).toBe(200);
    const reply = await json(res);
    expect(reply).toMatchObject({ jsonrpc: '2.0', id: 1 });
    const names = reply.result.tools.map((t: { name: string }) => t.name);
    expect(names).toEqual(expect.arrayContaining(['read_file', 'write_file', 'list_directory', 'run_command', 'http_request']));
  });

  test('a batch: one reply per request, ids echoed, notifications unanswered', async () => {
    const res = await gw.post([
      { jsonrpc: '2.0', id: 'a', method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} },
      { jsonrpc: '2.0', id: 3, method: 'nope' },
    ]);
    expect(res.status).toBe(200);
    const replies: RpcReply[] = await json(res);
    expect(replies).toHaveLength(3);
    const byId = new Map(replies.map((r) => [r.id, r]));
    expect(byId.get('a')?.result).toEqual({});
    expect(byId.get(2)?.result.tools.length).toBeGreaterThan(0);
    expect(byId.get(3)?.error?.code).toBe(-32601);
  });

  test('stateless: initialize is optional, and works when sent', async () => {
    const reply = await json(
      await gw.post({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    );
    expect(reply.result).toMatchObject({ protocolVersion: '2025-06-18', serverInfo: { name: 'toolgate' } });
  });

  test("tools/call runs in the caller's workspace through the bus and the sandbox", async () => {
    const write = await json(
      await gw.post({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'write_file', arguments: { path: 'a/b.txt', content: 'hi ☃' } } }),
    );
    expect(write.result.isError).toBeFalsy();
    expect(await fs.readFile(path.join(gw.workspaceOf('alice'), 'a/b.txt'), 'utf8')).toBe('hi ☃');
    const read = await json(await gw.post({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'a/b.txt' } } }));
    expect(read.result.content[0].text).toContain('hi ☃');
    // Another identity has another workspace.
    const other = await json(
      await gw.post(
        { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'a/b.txt' } } },
        { token: gw.token({ id: 'bob' }) },
      ),
    );
    expect(other.result.isError).toBe(true);
  });

  test('JSON-RPC errors travel with HTTP 200: unknown tool, bad params, invalid request', async () => {
    const unknown = await gw.post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'no_such_tool' } });
    expect(unknown.status).toBe(200);
    expect((await json(unknown)).error.code).toBe(-32602);
    const invalid = await gw.post({ jsonrpc: '1.0', id: 2, method: 'ping' });
    expect(invalid.status).toBe(200);
    expect((await json(invalid)).error).toMatchObject({ code: -32600 });
    const empty = await gw.post([]);
    expect((await json(empty)).error.code).toBe(-32600);
  });
});

describe('HTTP rules', () => {
  test('only notifications: 202 with no body (single and batch)', async () => {
    for (const body of [
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      [
        { jsonrpc: '2.0', method: 'a' },
        { jsonrpc: '2.0', method: 'b' },
      ],
    ]) {
      const res = await gw.post(body);
      expect(res.status).toBe(202);
      expect(await res.text()).toBe('');
      expect(res.headers.get('content-type')).toBeNull();
    }
  });

  test.each(['GET', 'DELETE', 'PUT', 'PATCH'])('%s / → 405 with Allow: POST and a JSON-RPC error body', async (method) => {
    const res = await fetch(gw.url, { method, headers: { Accept: 'text/event-stream', Authorization: `Bearer ${gw.token()}` } });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
    expect((await json(res)).error.code).toBe(-32600);
  });

  test('unknown paths → 404; POST to /healthz → 405 with Allow: GET, HEAD', async () => {
    expect((await fetch(new URL('/mcp', gw.url), { method: 'POST' })).status).toBe(404);
    const res = await fetch(new URL('/healthz', gw.url), { method: 'POST' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')?.split(/,\s*/).sort()).toEqual(['GET', 'HEAD']);
  });

  test.each([['application/json; charset=utf-8'], ['application/json;charset=UTF-8'], ['Application/JSON'], ['application/json ; charset="utf-8"']])(
    'Content-Type %s is accepted',
    async (type) => {
      const res = await gw.post({ jsonrpc: '2.0', id: 1, method: 'ping' }, { headers: { 'Content-Type': type } });
      expect(res.status).toBe(200);
      expect((await json(res)).result).toEqual({});
    },
  );

  test.each([
    ['application/jsonx'],
    ['text/plain'],
    ['application/json-patch+json'],
    ['text/json'],
    ['application/x-www-form-urlencoded'],
    ['application/json; charset=latin1'],
    ['application/json garbage'],
    ['multipart/form-data; boundary=x'],
  ])('Content-Type %s → 415 and nothing runs', async (type) => {
    const before = gw.events.length;
    const res = await gw.post(
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'write_file', arguments: { path: 'x415', content: '' } } },
      { headers: { 'Content-Type': type } },
    );
    expect(res.status).toBe(415);
    expect((await json(res)).error).toMatchObject({ code: -32600, message: expect.stringMatching(/^Unsupported Media Type/) });
    expect(gw.events.length).toBe(before);
  });

  test('no Content-Type → 415; Content-Encoding gzip → 415', async () => {
    const none = await raw({ method: 'POST', headers: { Authorization: `Bearer ${gw.token()}` } }, (req) =>
      req.end('{"jsonrpc":"2.0","id":1,"method":"ping"}'),
    );
    expect(none.status).toBe(415);
    const gz = await gw.post({ jsonrpc: '2.0', id: 1, method: 'ping' }, { headers: { 'Content-Encoding': 'gzip' } });
    expect(gz.status).toBe(415);
  });

  test('a body over the limit → 413 with -32007 and data.limit (declared length)', async () => {
    const res = await gw.post(undefined, { raw: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(70 * 1024) } }) });
    expect(res.status).toBe(413);
    expect((await json(res)).error).toMatchObject({ code: -32007, data: { limit: 64 * 1024 } });
    // The connection (and the server) still serve the next request.
    expect((await gw.post({ jsonrpc: '2.0', id: 2, method: 'ping' })).status).toBe(200);
  });

  test('a chunked body over the limit (no Content-Length) → 413', async () => {
    const res = await raw(
      { method: 'POST', headers: { Authorization: `Bearer ${gw.token()}`, 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' } },
      (req) => {
        req.write('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"');
        for (let i = 0; i < 10; i++) req.write('y'.repeat(8 * 1024));
        req.end('"}}');
      },
    );
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body).error.code).toBe(-32007);
  });

  test('a body at the limit is served', async () => {
    const base = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: '' } });
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'z'.repeat(64 * 1024 - base.length) } });
    expect(Buffer.byteLength(body)).toBe(64 * 1024);
    const res = await gw.post(undefined, { raw: body });
    expect(res.status).toBe(200);
  });

  test.each([
    ['bad JSON', '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]'],
    ['an empty body', ''],
    ['a truncated batch', '[{"jsonrpc":"2.0","id":1,"method":"ping"},'],
  ])('%s → HTTP 200 with -32700 and id null', async (_name, body) => {
    const res = await gw.post(undefined, { raw: body });
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32700, message: expect.stringMatching(/^Parse error/) } });
  });

  test('invalid UTF-8 → -32700', async () => {
    const res = await gw.post(undefined, { raw: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]) });
    expect(res.status).toBe(200);
    expect((await json(res)).error).toMatchObject({ code: -32700, message: expect.stringContaining('UTF-8') });
  });

  test('MCP-Protocol-Version: legacy ones pass; an unknown or malformed one → 400 UnsupportedProtocolVersion (-32022)', async () => {
    for (const version of ['2024-11-05', '2025-06-18', '2025-11-25']) {
      expect((await gw.post({ jsonrpc: '2.0', id: 1, method: 'ping' }, { headers: { 'MCP-Protocol-Version': version } })).status).toBe(200);
    }
    for (const version of ['1999-01-01', '2024-10-07', 'latest', '2025-06-18; drop table', '2099-01-01']) {
      const bad = await gw.post({ jsonrpc: '2.0', id: 1, method: 'ping' }, { headers: { 'MCP-Protocol-Version': version } });
      expect(bad.status).toBe(400);
      expect((await json(bad)).error).toMatchObject({
        code: -32022,
        data: { supported: expect.arrayContaining(['2026-07-28', '2025-11-25']), requested: version },
      });
    }
  });

  test('a dual-era client falling back to initialize is served the legacy way, whatever version header it sends', async () => {
    const headers = { 'MCP-Protocol-Version': '2026-07-28' };
    const init = await json(
      await gw.post(
        { jsonrpc: '2.0', id: 2, method: 'initialize', params: { protocolVersion: '2026-07-28', capabilities: {}, clientInfo: { name: 'n', version: '1' } } },
        { headers },
      ),
    );
    expect(init.result.protocolVersion).toBe('2025-11-25');
  });

  test("the SDK's Accept header and a session id header are fine", async () => {
    const res = await gw.post(
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { headers: { Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': 'whatever' } },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.headers.get('mcp-session-id')).toBeNull();
  });

  test('a client that disconnects aborts its running call', async () => {
    const seen = (types: string[]) =>
      new Promise<{ type: string; code?: number }>((resolve) => {
        const unsubscribe = gw.bus.subscribe((e) => {
          if (types.includes(e.type) && 'tenant' in e && e.tenant === 'cutter') {
            unsubscribe();
            resolve(e as { type: string; code?: number });
          }
        });
      });
    const started = seen(['job.started']);
    const ended = seen(['job.failed', 'job.completed']);
    const url = new URL(gw.url);
    const req = http.request({
      host: url.hostname,
      port: url.port,
      path: '/',
      method: 'POST',
      headers: { Authorization: `Bearer ${gw.token({ id: 'cutter' })}`, 'Content-Type': 'application/json' },
    });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'run_command', arguments: { command: 'sleep 30' } } }));
    await started;
    req.destroy();
    // The job ends at once, cancelled, instead of sleeping for 30 s.
    expect(await ended).toMatchObject({ type: 'job.failed', code: -32800 });
  });
});

describe('health', () => {
  test('GET /healthz → 200; GET /readyz → 200 while the bus is up', async () => {
    const health = await fetch(new URL('/healthz', gw.url));
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const ready = await fetch(new URL('/readyz', gw.url));
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
    expect((await fetch(new URL('/healthz', gw.url), { method: 'HEAD' })).status).toBe(200);
  });

  test('/readyz → 503 with the reason when the bus is down, or once the gateway drains', async () => {
    const other = await startTestGateway();
    try {
      other.gateway.drain();
      const draining = await fetch(new URL('/readyz', other.url));
      expect(draining.status).toBe(503);
      expect(await draining.json()).toEqual({ status: 'unavailable', reason: 'the gateway is draining' });
      expect((await fetch(new URL('/healthz', other.url))).status).toBe(200);
    } finally {
      await other.close();
    }
    const closedBus = await startTestGateway();
    try {
      await closedBus.bus.close();
      const res = await fetch(new URL('/readyz', closedBus.url));
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ status: 'unavailable', reason: 'the bus is closed' });
    } finally {
      await closedBus.close();
    }
  });
});
