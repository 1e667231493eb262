/**
 * MCP 2026-07-28 over HTTP (DESIGN §3; issue 10 items 3–6), against a real gateway on a socket:
 * the modern request rules (missing `_meta`, unsupported version, each header rule, header
 * mismatch incl. the base64 form, one message per POST, unknown method → 404), Origin and Host
 * (DNS rebinding) on both eras, and trace context reaching the executor side of the bus. The
 * spec's own call keeps its plain JSON answer.
 */
import * as http from 'node:http';
import { json, startTestGateway, TestGateway } from './harness';

const V = '2026-07-28';
const envelope = { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} };
const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01';
const b64 = (s: string) => `=?base64?${Buffer.from(s, 'utf8').toString('base64')}?=`;

/** A modern request and the headers a conforming client sends with it. */
function modern(id: number, method: string, params: Record<string, unknown> = {}) {
  const body = { jsonrpc: '2.0', id, method, params: { ...params, _meta: envelope } };
  const headers: Record<string, string> = { 'MCP-Protocol-Version': V, 'Mcp-Method': method, Accept: 'application/json, text/event-stream' };
  if (typeof params.name === 'string') headers['Mcp-Name'] = params.name;
  return { body, headers };
}

let gw: TestGateway;
let guarded: TestGateway;
beforeAll(async () => {
  [gw, guarded] = await Promise.all([
    startTestGateway(),
    startTestGateway({ env: { TOOLGATE_ALLOWED_ORIGINS: 'https://app.example, http://localhost:5173', TOOLGATE_ALLOWED_HOSTS: 'tools.internal' } }),
  ]);
});
afterAll(async () => {
  await Promise.all([gw?.close(), guarded?.close()]);
});

async function expectError(res: Response, status: number, code: number, id: unknown = expect.anything()) {
  expect(res.status).toBe(status);
  const body = await json(res);
  expect(body).toMatchObject({ jsonrpc: '2.0', id, error: { code } });
  return body.error as { code: number; message: string; data?: any };
}

describe('modern requests', () => {
  test('a conforming tools/call is served: 200, resultType complete, server identity', async () => {
    const { body, headers } = modern(1, 'tools/call', { name: 'write_file', arguments: { path: 'm.txt', content: 'modern' } });
    const res = await gw.post(body, { headers });
    expect(res.status).toBe(200);
    expect((await json(res)).result).toMatchObject({ resultType: 'complete', _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'toolgate' } } });
  });

  test("the spec's own call (no _meta, no initialize, no MCP headers, no Accept) keeps its plain JSON answer", async () => {
    const res = await gw.post({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    expect(res.status).toBe(200);
    const reply = await json(res);
    expect(reply.result.tools.length).toBe(19);
    expect(reply.result).not.toHaveProperty('resultType');
  });

  test('missing _meta under a 2026-07-28 header → 400 -32602; a missing capabilities field too', async () => {
    const noMeta = await gw.post(
      { jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} },
      { headers: { 'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/list' } },
    );
    expect((await expectError(noMeta, 400, -32602, 7)).message).toContain('io.modelcontextprotocol/protocolVersion');
    const noCaps = await gw.post(
      { jsonrpc: '2.0', id: 8, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': V } } },
      { headers: { 'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/list' } },
    );
    expect((await expectError(noCaps, 400, -32602, 8)).message).toContain('clientCapabilities');
  });

  test('an unsupported version → 400 -32022 with data.supported and data.requested (in the header or in _meta)', async () => {
    const inHeader = await gw.post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, { headers: { 'MCP-Protocol-Version': '1900-01-01' } });
    expect((await expectError(inHeader, 400, -32022, 2)).data).toEqual({
      supported: ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'],
      requested: '1900-01-01',
    });
    const body = { jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: { ...envelope, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } } };
    const inMeta = await gw.post(body, { headers: { 'MCP-Protocol-Version': '2099-01-01', 'Mcp-Method': 'tools/list' } });
    expect((await expectError(inMeta, 400, -32022, 3)).data).toMatchObject({ requested: '2099-01-01' });
  });

  test.each([
    ['MCP-Protocol-Version missing', { 'MCP-Protocol-Version': undefined }],
    ['Mcp-Method missing', { 'Mcp-Method': undefined }],
    ['Mcp-Name missing', { 'Mcp-Name': undefined }],
    ['MCP-Protocol-Version differs from _meta', { 'MCP-Protocol-Version': '2025-11-25' }],
    ['Mcp-Method differs from the body', { 'Mcp-Method': 'tools/list' }],
    ['Mcp-Name differs from the body', { 'Mcp-Name': 'read_file' }],
    ['Mcp-Name base64 of another name', { 'Mcp-Name': b64('read_file') }],
    ['Mcp-Name with a broken base64 sentinel', { 'Mcp-Name': '=?base64?not base64?=' }],
    ['Mcp-Name with edge whitespace decoded from base64 (not equal)', { 'Mcp-Name': b64(' list_directory ') }],
  ])('%s → 400 -32020 HeaderMismatch, nothing runs', async (_label, change) => {
    const { body, headers } = modern(4, 'tools/call', { name: 'list_directory', arguments: { path: '.' } });
    const sent: Record<string, string> = { ...headers };
    for (const [k, v] of Object.entries(change)) {
      if (v === undefined) delete sent[k];
      else sent[k] = v;
    }
    const before = gw.events.filter((e) => e.type === 'job.enqueued').length;
    await expectError(await gw.post(body, { headers: sent }), 400, -32020, 4);
    expect(gw.events.filter((e) => e.type === 'job.enqueued').length).toBe(before);
  });

  test("an Mcp-Name in the spec's base64 form is decoded before the comparison", async () => {
    const { body, headers } = modern(5, 'tools/call', { name: 'list_directory', arguments: { path: '.' } });
    const res = await gw.post(body, { headers: { ...headers, 'Mcp-Name': b64('list_directory') } });
    expect(res.status).toBe(200);
    expect((await json(res)).result.isError).toBeFalsy();
  });

  test('one JSON-RPC message per POST: a modern batch → 400 -32600', async () => {
    const { body, headers } = modern(6, 'tools/list');
    await expectError(await gw.post([body, { ...body, id: 7 }], { headers }), 400, -32600, null);
  });

  test('an unknown method, and a method 2026-07-28 removed (ping), → 404 -32601; legacy ping still 200', async () => {
    const unknown = modern(9, 'resources/list');
    await expectError(await gw.post(unknown.body, { headers: unknown.headers }), 404, -32601, 9);
    const ping = modern(10, 'ping');
    await expectError(await gw.post(ping.body, { headers: ping.headers }), 404, -32601, 10);
    const legacy = await gw.post({ jsonrpc: '2.0', id: 11, method: 'ping' });
    expect(legacy.status).toBe(200);
    expect((await json(legacy)).result).toEqual({});
  });

  test('a tool error, an unknown tool and a missing permission stay JSON-RPC answers with 200', async () => {
    const unknown = modern(12, 'tools/call', { name: 'no_such_tool', arguments: {} });
    const res = await gw.post(unknown.body, { headers: unknown.headers });
    expect(res.status).toBe(200);
    expect((await json(res)).error).toMatchObject({ code: -32602, message: expect.stringContaining('no_such_tool') });
    const denied = modern(13, 'tools/call', { name: 'run_command', arguments: { command: 'true' } });
    const limited = await gw.post(denied.body, { headers: denied.headers, token: gw.token({ permissions: ['file:read'] }) });
    expect(limited.status).toBe(200);
    expect((await json(limited)).error).toMatchObject({ code: -32003 });
  });

  test('GET and DELETE → 405 with Allow: POST, as before', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(gw.url, { method, headers: { Authorization: `Bearer ${gw.token()}`, 'MCP-Protocol-Version': V } });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
    }
  });

  test('trace context from _meta travels with the call to whoever runs it (job events carry it)', async () => {
    const { body, headers } = modern(14, 'tools/call', { name: 'list_directory', arguments: { path: '.' } });
    (body.params._meta as Record<string, unknown>).traceparent = TRACEPARENT;
    (body.params._meta as Record<string, unknown>).tracestate = 'vendor=abc';
    expect((await gw.post(body, { headers })).status).toBe(200);
    const started = gw.events.filter((e) => e.type === 'job.completed' && e.trace?.traceparent === TRACEPARENT);
    expect(started).toHaveLength(1);
    expect(started[0]).toMatchObject({ trace: { traceparent: TRACEPARENT, tracestate: 'vendor=abc' } });
  });
});

/** A raw request, so Host can be set (fetch always sends the URL's). */
function rawPost(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('Origin and Host (DNS rebinding), on both eras', () => {
  const listBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });

  test('no Origin (every non-browser client): unaffected', async () => {
    expect((await guarded.post({ jsonrpc: '2.0', id: 1, method: 'tools/list' })).status).toBe(200);
  });

  test('an Origin not on the list → 403 with a JSON-RPC error and no id; legacy and modern alike', async () => {
    const legacy = await guarded.post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { headers: { Origin: 'https://evil.example' } });
    await expectError(legacy, 403, -32009, null);
    const { body, headers } = modern(2, 'tools/list');
    await expectError(await guarded.post(body, { headers: { ...headers, Origin: 'https://evil.example' } }), 403, -32009, null);
    // With no list at all (the default), any browser origin but a loopback one is refused.
    await expectError(await gw.post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { headers: { Origin: 'https://app.example' } }), 403, -32009, null);
    await expectError(await guarded.post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { headers: { Origin: 'null' } }), 403, -32009, null);
  });

  test('an allowed Origin is served (compared as an origin: case and default port do not matter)', async () => {
    for (const origin of ['https://app.example', 'HTTPS://APP.example:443', 'http://localhost:5173']) {
      const res = await guarded.post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { headers: { Origin: origin } });
      expect(res.status).toBe(200);
    }
  });

  test('a loopback-bound gateway with no list serves loopback origins (MCP conformance: dns-rebinding-protection)', async () => {
    const port = new URL(gw.url).port;
    for (const origin of [`http://localhost:${port}`, `http://127.0.0.1:${port}`, `http://[::1]:${port}`]) {
      const res = await gw.post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { headers: { Origin: origin } });
      expect(res.status).toBe(200);
    }
  });

  test('a loopback-bound gateway refuses a Host that is not a loopback name (403), and accepts loopback ones and TOOLGATE_ALLOWED_HOSTS', async () => {
    const auth = { Authorization: `Bearer ${guarded.token()}` };
    const port = new URL(guarded.url).port;
    const refused = await rawPost(guarded.url, { ...auth, Host: `attacker.example:${port}` }, listBody);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32009 } });
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, 'tools.internal']) {
      expect((await rawPost(guarded.url, { ...auth, Host: host }, listBody)).status).toBe(200);
    }
  });
});
