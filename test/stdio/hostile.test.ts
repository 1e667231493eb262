/**
 * Hostile stdin against the real `toolgate stdio` binary: each input is answered as JSON-RPC says
 * (or ignored, for notifications), and a `ping` right after shows the server still serves.
 * `close()` of every server also checks it exits 0 on EOF and that stdout carried only JSON-RPC.
 */
import { nextBatch, nextResponse, probe } from '../protocol/wire';
import { StdioServer } from './server';

const MiB = 1024 * 1024;
const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('hostile lines, one server throughout', () => {
  let server: StdioServer;
  beforeAll(async () => {
    server = await StdioServer.start();
  });
  afterAll(async () => {
    await server?.close();
  });
  afterEach(async () => {
    expect(await probe(server)).toEqual([]);
  });

  test('a line that is not JSON: -32700, id null', async () => {
    await server.write('this is not json\n');
    expect(await nextResponse(server)).toMatchObject({ id: null, error: { code: -32700 } });
    await server.write('{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}\n');
    expect(await nextResponse(server)).toMatchObject({ id: null, error: { code: -32700 } });
  });

  test('bytes that are not UTF-8: -32700', async () => {
    await server.write(Buffer.from([0xff, 0xfe, 0x00, 0xc3, 0x28, 0x0a]));
    expect(await nextResponse(server)).toMatchObject({ id: null, error: { code: -32700 } });
  });

  test('an 8 MiB request is served', async () => {
    const head = '{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":"';
    const tail = '"}}';
    const line = head + 'x'.repeat(8 * MiB - head.length - tail.length) + tail;
    expect(Buffer.byteLength(line)).toBe(8 * MiB);
    await server.write(line + '\n');
    expect(await nextResponse(server, 15000)).toEqual({ jsonrpc: '2.0', id: 'big', result: {} });
  });

  test('an 8 MiB line of garbage: -32700', async () => {
    await server.write('{' + 'y'.repeat(8 * MiB - 1) + '\n');
    expect(await nextResponse(server, 15000)).toMatchObject({ id: null, error: { code: -32700 } });
  });

  test('100,000 levels of nesting: -32600, and the process survives', async () => {
    await server.write('['.repeat(100_000) + ']'.repeat(100_000) + '\n');
    // A non-empty array is a batch; its one element is not a Request object.
    const batch = await nextBatch(server);
    expect(batch).toEqual([{ jsonrpc: '2.0', id: null, error: expect.objectContaining({ code: -32600 }) }]);

    const deep = '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000);
    await server.write(`{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"read_file","arguments":${deep}}}\n`);
    expect(await nextResponse(server)).toMatchObject({ id: 'deep', error: { code: -32600 } });
  });

  test('an unknown method: -32601 with the id', async () => {
    await server.send('{"jsonrpc":"2.0","id":41,"method":"tools/destroy"}');
    expect(await nextResponse(server)).toMatchObject({ id: 41, error: { code: -32601 } });
  });

  test('a request without an id is a notification: no reply', async () => {
    await server.send('{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"path":"n.txt","content":"x"}}}');
    await server.send('{"jsonrpc":"2.0","method":"no/such/method"}');
    await server.send('{"jsonrpc":"2.0","method":"ping","params":{"a":' + '['.repeat(1000) + ']'.repeat(1000) + '}}');
    // (the afterEach probe shows nothing came back for any of them)
  });

  test('empty lines are skipped; several messages in one write are each answered', async () => {
    await server.write('\n\n\n');
    await server.write('{"jsonrpc":"2.0","id":1,"method":"ping"}\n\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n{"jsonrpc":"2.0","id":3,"method":"ping"}\n');
    const ids = [(await nextResponse(server)).id, (await nextResponse(server)).id, (await nextResponse(server)).id];
    expect(ids.sort()).toEqual([1, 2, 3]);
  });

  test('a message dribbled in one byte at a time, split inside a multi-byte character', async () => {
    const frame = Buffer.from(
      '{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"write_file","arguments":{"path":"snow.txt","content":"☃ ünïcödé"}}}\n',
    );
    for (let i = 0; i < frame.length; i += 7) await server.write(frame.subarray(i, i + 7));
    expect(await nextResponse(server)).toMatchObject({ id: 'slow', result: { structuredContent: { path: 'snow.txt' } } });
    await server.send('{"jsonrpc":"2.0","id":"back","method":"tools/call","params":{"name":"read_file","arguments":{"path":"snow.txt"}}}');
    expect(await nextResponse(server)).toMatchObject({ id: 'back', result: { structuredContent: { content: '☃ ünïcödé' } } });
  });
});

describe('TOOLGATE_MAX_MESSAGE_BYTES', () => {
  const LIMIT = 4096;
  let server: StdioServer;
  beforeAll(async () => {
    server = await StdioServer.start({ env: { TOOLGATE_MAX_MESSAGE_BYTES: String(LIMIT) } });
  });
  afterAll(async () => {
    await server?.close();
  });
  afterEach(async () => {
    expect(await probe(server)).toEqual([]);
  });

  const pingOfBytes = (bytes: number, id: string) => {
    const head = `{"jsonrpc":"2.0","id":"${id}","method":"ping","params":{"pad":"`;
    const tail = '"}}';
    return head + 'p'.repeat(bytes - head.length - tail.length) + tail;
  };

  test('a line of exactly the limit is served', async () => {
    await server.send(pingOfBytes(LIMIT, 'edge'));
    expect(await nextResponse(server)).toEqual({ jsonrpc: '2.0', id: 'edge', result: {} });
  });

  test('a line one byte over: -32007 with id null and the limit', async () => {
    await server.send(pingOfBytes(LIMIT + 1, 'over'));
    expect(await nextResponse(server)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32007, message: expect.stringMatching(/too large/i), data: { limit: LIMIT } },
    });
  });

  test('an over-long line arriving in pieces gets exactly one -32007', async () => {
    const line = pingOfBytes(LIMIT * 3, 'pieces');
    for (let i = 0; i < line.length; i += 1000) {
      await server.write(line.slice(i, i + 1000));
      await tick(5);
    }
    await server.write('\n');
    expect(await nextResponse(server)).toMatchObject({ id: null, error: { code: -32007 } });
    // The probe (afterEach) is the very next reply: no second error, no reply to the discarded line.
  });

  test('an over-long line and a good one in the same write: the good one is still served', async () => {
    await server.write(pingOfBytes(LIMIT * 2, 'dropped') + '\n{"jsonrpc":"2.0","id":"after","method":"ping"}\n');
    expect(await nextResponse(server)).toMatchObject({ id: null, error: { code: -32007 } });
    expect(await nextResponse(server)).toEqual({ jsonrpc: '2.0', id: 'after', result: {} });
  });
});

describe('line endings and ends of input', () => {
  test('CRLF line endings work, for single messages and batches', async () => {
    const server = await StdioServer.start();
    try {
      await server.write('{"jsonrpc":"2.0","id":1,"method":"ping"}\r\n');
      expect(await nextResponse(server)).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
      await server.write('[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"nope"}]\r\n\r\n');
      const batch = await nextBatch(server);
      expect(batch.map((r) => r.id)).toEqual([2, 3]);
      await server.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\r\n');
      expect(await probe(server)).toEqual([]);
    } finally {
      await server.close();
    }
  });

  test('a last line without a newline is still answered at EOF, then exit 0', async () => {
    const server = await StdioServer.start();
    try {
      await server.write('{"jsonrpc":"2.0","id":"last","method":"ping"}');
      const exit = await server.endInput();
      expect(exit).toEqual({ code: 0, signal: null });
      expect(await nextResponse(server)).toEqual({ jsonrpc: '2.0', id: 'last', result: {} });
    } finally {
      await server.close();
    }
  });

  test('EOF with requests in flight: every one is answered before exit 0', async () => {
    const server = await StdioServer.start();
    try {
      const n = 20;
      let frames = '';
      for (let i = 0; i < n; i++) {
        frames +=
          JSON.stringify({
            jsonrpc: '2.0',
            id: i,
            method: 'tools/call',
            params: { name: 'write_file', arguments: { path: `f${i}.txt`, content: `file ${i}` } },
          }) + '\n';
      }
      await server.write(frames);
      expect(await server.endInput()).toEqual({ code: 0, signal: null });
      const ids: unknown[] = [];
      for (let i = 0; i < n; i++) ids.push((await nextResponse(server)).id);
      expect(ids.sort((a, b) => Number(a) - Number(b))).toEqual(Array.from({ length: n }, (_, i) => i));
    } finally {
      await server.close();
    }
  });

  test.each(['SIGTERM', 'SIGINT'] as const)('%s: exit 0', async (signal) => {
    const server = await StdioServer.start();
    try {
      expect(await probe(server)).toEqual([]); // ready: the signal handlers are installed
      server.child.kill(signal);
      expect(await server.exited).toEqual({ code: 0, signal: null });
    } finally {
      await server.close();
    }
  });

  test('stdin closed while idle: exit 0 without writing anything', async () => {
    const server = await StdioServer.start();
    try {
      expect(await server.endInput()).toEqual({ code: 0, signal: null });
      expect(server.stdoutLines).toEqual([]);
    } finally {
      await server.close();
    }
  });
});
