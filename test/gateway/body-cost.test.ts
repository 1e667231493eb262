/**
 * What a request body may cost the gateway (gateway/body-cost.ts, json-shape.ts, drain.ts):
 * elements counted as the bytes arrive (-32600 before the body is parsed or even complete), bytes
 * in flight per identity (429 with Retry-After, other identities unaffected, released when the
 * reply is sent), and refusals a client still uploading can read (Node's fetch posting 64 MiB
 * gets its 413, not a reset), with the discarding bounded.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { drainRefused } from '../../gateway/drain';
import { JsonShape } from '../../gateway/json-shape';
import { json, startTestGateway, TestGateway } from './harness';

const MIB = 1024 * 1024;

function elementsOf(text: string, chunk = 7): number {
  const shape = new JsonShape(Number.MAX_SAFE_INTEGER);
  const bytes = Buffer.from(text);
  for (let i = 0; i < bytes.length; i += chunk) shape.push(bytes.subarray(i, i + chunk));
  return shape.elements;
}

describe('JsonShape', () => {
  test.each([
    ['1', 0],
    ['"a[b{c,d"', 0],
    ['[]', 1],
    ['{}', 1],
    ['[1]', 2],
    ['[1,2,3]', 4],
    ['{"a":[1,2]}', 5],
    ['[{},{},{}]', 7],
    ['{"k\\"[,{":"v\\\\","x":{"y":[ ]}}', 6],
    [' [ 1 , [ ] , { "a" : "]" } ] ', 7],
  ])('%s has %i elements, whatever the chunking', (text, n) => {
    expect(elementsOf(text, 1)).toBe(n);
    expect(elementsOf(text, 3)).toBe(n);
    expect(elementsOf(text, 1000)).toBe(n);
  });

  test('stops at the first element past the limit', () => {
    const shape = new JsonShape(10);
    expect(shape.push(Buffer.from('[' + '0,'.repeat(8)))).toBe(true);
    expect(shape.push(Buffer.from('0,0,0]'))).toBe(false);
  });

  test('counts nothing inside a large string, and scans it quickly', () => {
    const shape = new JsonShape(5);
    const body = Buffer.from(`{"content":"${'[{},'.repeat(2 * MIB)}\\"]"}`);
    const started = process.hrtime.bigint();
    expect(shape.push(body)).toBe(true);
    expect(shape.elements).toBe(2);
    // A generous bound (8 MiB of string content): the scan jumps from quote to quote.
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(2000);
  });
});

describe('body cost at the gateway', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({
      env: { TOOLGATE_MAX_MESSAGE_BYTES: String(4 * MIB), TOOLGATE_MAX_JSON_ELEMENTS: '1000', TOOLGATE_MAX_BODY_BYTES_IN_FLIGHT_PER_IDENTITY: String(6 * MIB) },
    });
  });
  afterAll(async () => {
    await gw?.close();
  });

  const list = (n: number) => ({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { junk: Array.from({ length: n }, () => ({})) } } });

  test('a body within the element limit is served; one past it gets -32600 naming the limit', async () => {
    const ok = await gw.post(list(400)); // 1 + 1 + 1 + 1 + 400×2 elements
    expect(ok.status).toBe(200);
    expect((await json(ok)).result.tools.length).toBeGreaterThan(0);
    const over = await gw.post(list(600));
    expect(over.status).toBe(200);
    expect(await json(over)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32600, message: 'Invalid Request: the message has more than 1000 JSON elements (TOOLGATE_MAX_JSON_ELEMENTS)', data: { limit: 1000 } },
    });
  });

  test('an element flood is refused before its end: the server stops counting at the limit', async () => {
    // 3 MiB of `{},`: far past the limit in its first kilobytes.
    const body = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":[${'{},'.repeat(MIB)}{}]}}`;
    const res = await gw.post(undefined, { raw: body });
    expect((await json(res)).error.message).toMatch(/more than 1000 JSON elements/);
    // The server stopped reading where the limit was crossed: nothing of the body was parsed.
  });

  test("an identity's bodies in flight are bounded (429, Retry-After); another identity is unaffected; the budget comes back", async () => {
    const url = new URL(gw.url);
    // alice holds 3.5 MiB in flight: a declared body she is slow to send.
    const held = http.request({
      host: url.hostname,
      port: url.port,
      method: 'POST',
      path: '/',
      headers: { Authorization: `Bearer ${gw.token({ id: 'alice' })}`, 'Content-Type': 'application/json', 'Content-Length': String(3.5 * MIB) },
    });
    const heldReply = new Promise<number>((resolve, reject) => {
      held.on('response', (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      held.on('error', reject);
    });
    const prefix = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"';
    held.write(prefix);
    held.flushHeaders();
    while (gw.gateway.bodyCost.bytesInFlight('alice') < 3.5 * MIB) await new Promise((r) => setTimeout(r, 10));
    // Her next body would pass the size limit but not her budget: refused at once, by its Content-Length.
    const second = await gw.post(undefined, { token: gw.token({ id: 'alice' }), raw: `${prefix}${'x'.repeat(3 * MIB)}"}}` });
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toBe('1');
    const body = await json(second);
    expect(body.error.code).toBe(-32004);
    expect(body.error.message).toMatch(/at most 6291456 may be at once \(TOOLGATE_MAX_BODY_BYTES_IN_FLIGHT_PER_IDENTITY\)/);
    expect(body.error.data).toMatchObject({ limit: 'bodyBytesInFlight', max: 6 * MIB });
    // Bob's identical body is his own budget's business.
    expect((await gw.post(undefined, { token: gw.token({ id: 'bob' }), raw: `${prefix}${'x'.repeat(3 * MIB)}"}}` })).status).toBe(200);
    // Alice finishes; her reply frees the budget.
    held.end(`${'x'.repeat(3.5 * MIB - prefix.length - 3)}"}}`);
    expect(await heldReply).toBe(200);
    expect((await gw.post(undefined, { token: gw.token({ id: 'alice' }), raw: `${prefix}${'x'.repeat(3 * MIB)}"}}` })).status).toBe(200);
  });

  test('a 64 MiB POST from fetch (undici) gets its 413, not a connection reset, with or without Content-Length', async () => {
    const big = Buffer.alloc(64 * MIB, 0x20);
    for (let i = 0; i < 3; i++) {
      const declared = await fetch(gw.url, {
        method: 'POST',
        headers: { Authorization: `Bearer ${gw.token()}`, 'Content-Type': 'application/json' },
        body: big,
      });
      expect(declared.status).toBe(413);
      expect((await json(declared)).error.code).toBe(-32007);
      const streamed = await fetch(gw.url, {
        method: 'POST',
        headers: { Authorization: `Bearer ${gw.token()}`, 'Content-Type': 'application/json' },
        body: new ReadableStream({
          start(c) {
            for (let o = 0; o < big.length; o += MIB) c.enqueue(big.subarray(o, o + MIB));
            c.close();
          },
        }),
        duplex: 'half',
      } as RequestInit);
      expect(streamed.status).toBe(413);
      expect((await json(streamed)).error.message).toMatch(/exceeds the limit of 4194304 bytes/);
    }
  }, 60_000);
});

describe('drainRefused', () => {
  const bound = 16 * MIB;
  let server: http.Server;
  let port: number;
  const readBySocket: number[] = [];
  beforeAll(async () => {
    // Refuses every request before reading its body, as the gateway's error boundary does.
    server = http.createServer((req, res) => {
      void drainRefused(req, res, bound).then(() => {
        res.writeHead(413, { 'content-type': 'text/plain' });
        res.end('refused');
      });
    });
    server.on('connection', (socket) => socket.on('close', () => readBySocket.push(socket.bytesRead)));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  const send = (bytes: number, keepAlive: boolean) =>
    new Promise<string>((resolve) => {
      const agent = new http.Agent({ keepAlive });
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', agent, headers: { 'Content-Length': String(bytes) } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c));
        res.on('end', () => resolve(`${res.statusCode} ${text}`));
        res.on('error', () => resolve('cut'));
      });
      req.on('error', () => resolve('cut'));
      // Written in pieces, as a client uploading would.
      const piece = Buffer.alloc(64 * 1024);
      let left = bytes;
      const more = () => {
        while (left > 0) {
          const n = Math.min(left, piece.length);
          left -= n;
          if (!req.write(piece.subarray(0, n))) return void req.once('drain', more);
        }
        req.end();
      };
      more();
      void agent;
    });

  test.each([true, false])('a client still uploading reads the refusal (keep-alive: %s)', async (keepAlive) => {
    for (let i = 0; i < 3; i++) expect(await send(bound / 2, keepAlive)).toBe('413 refused');
  });

  test('past the bound the server stops reading: the connection is cut', async () => {
    const before = readBySocket.length;
    await send(4 * bound, false);
    while (readBySocket.length === before) await new Promise((r) => setTimeout(r, 20));
    expect(readBySocket.at(-1)).toBeLessThan(2 * bound);
  });
});

describe('configuration', () => {
  test('defaults: 8 MiB bodies, 4 × that in flight per identity, 100000 elements; the budget may not be below the body limit', () => {
    const { loadConfig } = require('../../shared/config') as typeof import('../../shared/config');
    const c = loadConfig({});
    expect([c.protocol.maxMessageBytes, c.gateway.maxBodyBytesInFlight, c.gateway.maxJsonElements, c.limits.maxWriteBytes]).toEqual([
      8 * MIB,
      32 * MIB,
      100_000,
      4 * MIB,
    ]);
    expect(loadConfig({ TOOLGATE_MAX_MESSAGE_BYTES: String(MIB) }).gateway.maxBodyBytesInFlight).toBe(4 * MIB);
    expect(() => loadConfig({ TOOLGATE_MAX_BODY_BYTES_IN_FLIGHT_PER_IDENTITY: String(MIB) })).toThrow(/must be at least TOOLGATE_MAX_MESSAGE_BYTES/);
    expect(() => loadConfig({ TOOLGATE_MAX_JSON_ELEMENTS: '0' })).toThrow(/TOOLGATE_MAX_JSON_ELEMENTS must be a positive whole number/);
  });
});
