/**
 * `toolgate shim` as a real process against a real HTTP server on loopback that plays the
 * gateway: what it sends (credentials, the frame as it came), what it writes back (the reply,
 * ids intact, one line each), and that every request is answered whatever the gateway does.
 */
import { ErrorCode } from '../../shared/protocol/errors';
import { freePort, jsonRpcReplies, sendJson, TestGateway, until } from './gateway';
import { API_KEY, ShimProcess, TOKEN } from './shim-process';

const ping = (id: string | number) => ({ jsonrpc: '2.0', id, method: 'ping' });

let gateway: TestGateway | undefined;
let shim: ShimProcess | undefined;

afterEach(async () => {
  try {
    await shim?.close();
  } finally {
    if (shim && shim.child.exitCode === null) shim.child.kill('SIGKILL');
    await gateway?.stop().catch(() => undefined);
    shim = undefined;
    gateway = undefined;
  }
});

async function start(args: string[] = [], env: Record<string, string | undefined> = {}): Promise<[TestGateway, ShimProcess]> {
  gateway = await TestGateway.start();
  shim = await ShimProcess.start(gateway.url, { args, env });
  return [gateway, shim];
}

describe('relaying', () => {
  test('a request goes out with the credentials and comes back with its id, number or string', async () => {
    const [gw, sh] = await start();
    await sh.send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    await sh.send({ jsonrpc: '2.0', id: 'abc', method: 'tools/call', params: { name: 'x' } });
    expect(await sh.reply(1)).toEqual({ jsonrpc: '2.0', id: 1, result: { method: 'tools/list', params: null } });
    expect(await sh.reply('abc')).toEqual({ jsonrpc: '2.0', id: 'abc', result: { method: 'tools/call', params: { name: 'x' } } });
    for (const seen of gw.seen) {
      expect(seen.method).toBe('POST');
      expect(seen.url).toBe('/');
      expect(seen.headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(seen.headers['x-api-key']).toBe(API_KEY);
      expect(seen.headers['content-type']).toBe('application/json');
    }
  });

  test('without TOOLGATE_API_KEY no X-API-Key header is sent', async () => {
    const [gw, sh] = await start([], { TOOLGATE_API_KEY: undefined });
    await sh.send(ping(1));
    await sh.reply(1);
    expect(gw.seen[0]!.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(gw.seen[0]!.headers).not.toHaveProperty('x-api-key');
  });

  test('the frame is posted byte for byte as it came, and the URL path is kept', async () => {
    gateway = await TestGateway.start();
    shim = await ShimProcess.start(`${gateway.url}mcp?tenant=a`);
    const frame = '{ "jsonrpc" : "2.0","id":7,  "method":"ping", "params":{"s":"\\u00e9 ☃","n":1.50}}';
    await shim.send(frame);
    await shim.reply(7);
    expect(gateway.seen[0]!.body).toBe(frame);
    expect(gateway.seen[0]!.url).toBe('/mcp?tenant=a');
  });

  test('a batch is relayed as one POST and its reply as one line, ids intact', async () => {
    const [gw, sh] = await start();
    const batch = [ping(1), { jsonrpc: '2.0', method: 'notifications/progress' }, ping('two')];
    await sh.send(batch);
    const reply = await sh.batch(1);
    expect(reply.map((r) => r.id)).toEqual([1, 'two']);
    expect(gw.seen).toHaveLength(1);
    expect(JSON.parse(gw.seen[0]!.body)).toEqual(batch);
  });

  test('notifications alone: the gateway answers 202 and nothing is written', async () => {
    const [gw, sh] = await start();
    await sh.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    await sh.send([
      { jsonrpc: '2.0', method: 'notifications/a' },
      { jsonrpc: '2.0', method: 'notifications/b' },
    ]);
    await sh.send(ping(3));
    // EOF lets every POST settle before the exit, so absence is certain afterwards.
    expect(await sh.endInput()).toEqual({ code: 0, signal: null });
    expect(gw.seen).toHaveLength(3);
    expect(gw.seen.every((s) => s.answered)).toBe(true);
    expect(sh.replies).toEqual([{ jsonrpc: '2.0', id: 3, result: { method: 'ping', params: null } }]);
  });

  test('requests are in flight together: a slow one does not hold back the next', async () => {
    const [gw, sh] = await start();
    // The gateway holds "first" until it has seen "second": a shim that posted one at a time would deadlock.
    gw.handler = (seen, res) => {
      if (seen.body.includes('"first"')) {
        void gw
          .waitFor((s) => s.body.includes('"second"'), 'the second request')
          .then(() =>
            sendJson(
              res,
              200,
              jsonRpcReplies(seen.body, () => 'one'),
            ),
          );
      } else
        sendJson(
          res,
          200,
          jsonRpcReplies(seen.body, () => 'two'),
        );
    };
    await sh.send({ jsonrpc: '2.0', id: 'first', method: 'slow' });
    await gw.waitFor((s) => s.body.includes('"first"'));
    await sh.send({ jsonrpc: '2.0', id: 'second', method: 'fast' });
    expect((await sh.reply('first')).result).toBe('one');
    expect((await sh.reply('second')).result).toBe('two');
  });

  test('a pretty-printed reply is written as a single line', async () => {
    const [gw, sh] = await start();
    gw.handler = (seen, res) =>
      sendJson(
        res,
        200,
        JSON.stringify(
          jsonRpcReplies(seen.body, () => ({ text: 'a\nb', list: [1, 2] })),
          null,
          2,
        ) + '\n',
      );
    await sh.send(ping(5));
    expect(await sh.reply(5)).toEqual({ jsonrpc: '2.0', id: 5, result: { text: 'a\nb', list: [1, 2] } });
    expect(sh.lines).toHaveLength(1);
  });

  test('an unparseable line gets -32700 here, without a POST, and the shim keeps serving', async () => {
    const [gw, sh] = await start();
    await sh.send('{"jsonrpc":"2.0","id":1,"method":');
    expect(await sh.reply(null)).toMatchObject({ id: null, error: { code: ErrorCode.ParseError } });
    await sh.send(ping(2));
    await sh.reply(2);
    expect(gw.seen).toHaveLength(1);
  });

  test('a line over TOOLGATE_MAX_MESSAGE_BYTES gets -32007 without a POST', async () => {
    const [gw, sh] = await start([], { TOOLGATE_MAX_MESSAGE_BYTES: '1024' });
    await sh.send({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(5000) } });
    expect(await sh.reply(null)).toMatchObject({ error: { code: ErrorCode.MessageTooLarge, data: { limit: 1024 } } });
    await sh.send(ping(2));
    await sh.reply(2);
    expect(gw.seen).toHaveLength(1);
  });
});

describe('a gateway that fails', () => {
  test('down: each pending request gets -32006 naming the gateway, and serving resumes once it is back', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/`;
    shim = await ShimProcess.start(url);
    await shim.send(ping(1));
    await shim.send([ping('b1'), { jsonrpc: '2.0', method: 'notifications/x' }, ping('b2')]);
    await shim.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const one = await shim.reply(1);
    expect(one.error).toEqual({ code: ErrorCode.Unavailable, message: `gateway unreachable at ${url}: ECONNREFUSED` });
    const batch = await shim.batch('b1');
    expect(batch.map((r) => [r.id, r.error?.code])).toEqual([
      ['b1', ErrorCode.Unavailable],
      ['b2', ErrorCode.Unavailable],
    ]);

    gateway = await TestGateway.start({ port });
    await shim.send(ping(2));
    expect((await shim.reply(2)).result).toEqual({ method: 'ping', params: null });
    expect(await shim.endInput()).toEqual({ code: 0, signal: null });
    expect(shim.lines).toHaveLength(3); // the notification got nothing, even when it could not be delivered
  });

  test('going down between requests: kept-alive connections do not turn into hangs', async () => {
    const [gw, sh] = await start();
    await sh.send(ping(1));
    await sh.reply(1);
    await gw.stop();
    await sh.send(ping(2));
    expect((await sh.reply(2)).error?.code).toBe(ErrorCode.Unavailable);
  });

  test('slower than --timeout-ms: -32005, and the POST is abandoned', async () => {
    const [gw, sh] = await start(['--timeout-ms', '300']);
    gw.handler = () => undefined; // never answers
    await sh.send({ jsonrpc: '2.0', id: 'slow', method: 'tools/call' });
    const reply = await sh.reply('slow');
    expect(reply.error).toEqual({ code: ErrorCode.Timeout, message: `no reply from the gateway at ${gw.url} within 300 ms` });
    await until(() => (gw.seen[0]?.abandoned ? true : undefined), 'the gateway to see the connection closed');
  });

  test('a 200 whose body is not JSON: -32006 for each request', async () => {
    const [gw, sh] = await start();
    gw.handler = (_seen, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>proxy says hi</html>');
    };
    await sh.send(ping(1));
    await sh.send([ping(2), ping(3)]);
    expect(await sh.reply(1)).toEqual({
      jsonrpc: '2.0',
      id: 1,
      error: { code: ErrorCode.Unavailable, message: `the gateway at ${gw.url} answered HTTP 200 with a body that is not JSON` },
    });
    expect((await sh.batch(2)).map((r) => [r.id, r.error?.code])).toEqual([
      [2, ErrorCode.Unavailable],
      [3, ErrorCode.Unavailable],
    ]);
  });

  test('JSON that answers nothing, or forgets an id: the missing ones get -32006, the rest pass', async () => {
    const [gw, sh] = await start();
    gw.handler = (seen, res) => {
      if (seen.body.startsWith('[')) sendJson(res, 200, [{ jsonrpc: '2.0', id: 'kept', result: 'ok' }]);
      else sendJson(res, 200, { status: 'ok' });
    };
    await sh.send(ping(1));
    expect((await sh.reply(1)).error?.code).toBe(ErrorCode.Unavailable);
    await sh.send([ping('kept'), ping('lost')]);
    expect(await sh.batch('kept')).toEqual([
      { jsonrpc: '2.0', id: 'kept', result: 'ok' },
      { jsonrpc: '2.0', id: 'lost', error: { code: ErrorCode.Unavailable, message: `the gateway at ${gw.url} sent no reply for this request` } },
    ]);
  });

  test('a batch refused as a whole (one null-id error) gives that error to each request', async () => {
    const [gw, sh] = await start();
    const refusal = { code: ErrorCode.InvalidRequest, message: 'Invalid Request: batch of 2 exceeds the limit of 1' };
    gw.handler = (_seen, res) => sendJson(res, 200, { jsonrpc: '2.0', id: null, error: refusal });
    await sh.send([ping(1), ping(2)]);
    expect(await sh.batch(1)).toEqual([
      { jsonrpc: '2.0', id: 1, error: refusal },
      { jsonrpc: '2.0', id: 2, error: refusal },
    ]);
  });

  test('5xx with an HTML page: -32006 naming the status', async () => {
    const [gw, sh] = await start();
    gw.handler = (_seen, res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<h1>Bad Gateway</h1>');
    };
    await sh.send(ping(1));
    expect((await sh.reply(1)).error).toEqual({ code: ErrorCode.Unavailable, message: `the gateway at ${gw.url} answered HTTP 502` });
  });

  test("401: the gateway's JSON-RPC error passes through, addressed to the request", async () => {
    const [gw, sh] = await start();
    const error = { code: ErrorCode.Unauthenticated, message: 'Unauthenticated: the token has expired', data: { reason: 'expired' } };
    gw.handler = (_seen, res) => {
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error }));
    };
    await sh.send(ping(9));
    await sh.send([ping('a'), ping('b')]);
    expect(await sh.reply(9)).toEqual({ jsonrpc: '2.0', id: 9, error });
    expect(await sh.batch('a')).toEqual([
      { jsonrpc: '2.0', id: 'a', error },
      { jsonrpc: '2.0', id: 'b', error },
    ]);
  });

  test('401/413/429 without a JSON body (e.g. from Caddy) map to -32008/-32007/-32004', async () => {
    const [gw, sh] = await start();
    gw.handler = (seen, res) => {
      const status = Number((JSON.parse(seen.body) as { id: number }).id);
      res.writeHead(status, status === 429 ? { 'retry-after': '2' } : {});
      res.end(status === 401 ? '' : 'nope');
    };
    for (const id of [401, 413, 429]) await sh.send(ping(id));
    expect((await sh.reply(401)).error).toEqual({
      code: ErrorCode.Unauthenticated,
      message: `the gateway at ${gw.url} answered HTTP 401: check TOOLGATE_TOKEN and TOOLGATE_API_KEY`,
    });
    expect((await sh.reply(413)).error?.code).toBe(ErrorCode.MessageTooLarge);
    expect((await sh.reply(429)).error).toMatchObject({ code: ErrorCode.RateLimited, data: { retryAfterMs: 2000 } });
  });
});

describe('cancellation and exit', () => {
  test('notifications/cancelled aborts the POST it names, is forwarded, and the request gets no reply', async () => {
    const [gw, sh] = await start();
    gw.handler = (seen, res) => {
      if (seen.body.includes('"hang"')) return; // held until the client goes away
      if (!seen.body.includes('"id"')) {
        res.writeHead(202);
        res.end();
      } else
        sendJson(
          res,
          200,
          jsonRpcReplies(seen.body, () => ({})),
        );
    };
    await sh.send({ jsonrpc: '2.0', id: 9, method: 'hang' });
    const held = await gw.waitFor((s) => s.body.includes('"hang"'));
    const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 9, reason: 'user stopped it' } };
    await sh.send(cancel);
    await until(() => (held.abandoned ? true : undefined), 'the held POST to be abandoned');
    await gw.waitFor((s) => s.body === JSON.stringify(cancel), 'the forwarded cancellation');
    await sh.send(ping(10));
    await sh.reply(10);
    expect(await sh.endInput()).toEqual({ code: 0, signal: null });
    expect(sh.replies).toEqual([{ jsonrpc: '2.0', id: 10, result: {} }]);
  });

  test('stdin EOF: running requests still get their replies, then exit 0', async () => {
    const [gw, sh] = await start();
    gw.handler = (seen, res) =>
      setTimeout(
        () =>
          sendJson(
            res,
            200,
            jsonRpcReplies(seen.body, () => 'late'),
          ),
        300,
      );
    await sh.send(ping('late'));
    await gw.waitFor(() => true);
    expect(await sh.endInput()).toEqual({ code: 0, signal: null });
    expect(sh.replies).toEqual([{ jsonrpc: '2.0', id: 'late', result: 'late' }]);
  });

  test('stdin EOF with a request that never ends: exit 0 after the grace time, the POST abandoned', async () => {
    const [gw, sh] = await start([], { TOOLGATE_SHUTDOWN_GRACE_MS: '200' });
    gw.handler = () => undefined;
    await sh.send(ping('forever'));
    const held = await gw.waitFor(() => true);
    expect(await sh.endInput()).toEqual({ code: 0, signal: null });
    await until(() => (held.abandoned ? true : undefined), 'the held POST to be abandoned');
  });

  test('SIGTERM: exit 0 at once, abandoning running POSTs', async () => {
    const [gw, sh] = await start();
    gw.handler = () => undefined;
    await sh.send(ping('held'));
    const held = await gw.waitFor(() => true);
    sh.child.kill('SIGTERM');
    expect(await sh.exited).toEqual({ code: 0, signal: null });
    await until(() => (held.abandoned ? true : undefined), 'the held POST to be abandoned');
  });
});
