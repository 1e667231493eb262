/**
 * The dispatcher's own limits and its one error translation: nesting depth, batch size,
 * replies that cannot be serialized, and thrown errors that must not leak detail.
 */
import { Dispatcher, InFlight, MethodHandler, NotificationHandler } from '../../shared/protocol/dispatcher';
import { ErrorCode, ProtocolError, ToolError } from '../../shared/protocol/errors';
import { asResponse, Reply } from './wire';

const limits = { maxDepth: 8, maxBatch: 5 };

const notified: unknown[] = [];
const methods = new Map<string, MethodHandler<null>>([
  ['ping', () => ({})],
  ['echo', (params) => params ?? null],
  ['nothing', () => undefined],
  ['bigint', () => ({ n: BigInt(1) })],
  [
    'circular',
    () => {
      const o: Record<string, unknown> = {};
      o.self = o;
      return o;
    },
  ],
  [
    'crash',
    () => {
      throw new Error('secret detail /etc/shadow');
    },
  ],
  [
    'crash-async',
    async () => {
      throw new TypeError('secret detail');
    },
  ],
  [
    'tool-error',
    () => {
      throw new ToolError('a tool error is not a protocol error');
    },
  ],
  [
    'denied',
    () => {
      throw new ProtocolError(ErrorCode.PermissionDenied, 'Permission denied', { permission: 'file:write' });
    },
  ],
]);
const notifications = new Map<string, NotificationHandler<null>>([
  ['note', (params) => void notified.push(params)],
  [
    'note-crash',
    () => {
      throw new Error('boom');
    },
  ],
]);
const unexpected: Array<{ err: unknown; method: string }> = [];
const dispatcher = new Dispatcher<null>(methods, notifications, limits, (err, method) => unexpected.push({ err, method }));
beforeEach(() => {
  unexpected.length = 0;
});

async function send(text: string): Promise<unknown> {
  const out = await dispatcher.dispatchText(text, null, new InFlight());
  return out === undefined ? undefined : JSON.parse(out);
}
const one = async (text: string): Promise<Reply> => asResponse(await send(text));

/** A value nesting `levels` deep counting the outermost object as level 1: {"a":{"a":…{}}}. */
function nested(levels: number): Record<string, unknown> {
  let v: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) v = { a: v };
  return v;
}
/** A request whose message object nests exactly `levels` deep. */
const requestOfDepth = (levels: number, id: unknown = 1) => JSON.stringify({ jsonrpc: '2.0', id, method: 'echo', params: nested(levels - 1) });

describe('nesting depth', () => {
  test('a message exactly maxDepth deep is served; one level more is -32600 with its id', async () => {
    expect((await one(requestOfDepth(8))).result).toBeDefined();
    const tooDeep = await one(requestOfDepth(9, 'deep'));
    expect(tooDeep).toMatchObject({ id: 'deep', error: { code: -32600 } });
    expect(tooDeep.error?.message).toContain('8');
  });

  test('100,000 levels of arrays or objects: -32600, no stack overflow', async () => {
    const arrays = '['.repeat(100_000) + ']'.repeat(100_000);
    // A batch holding one (invalid, too deep) element: an array with one error, like [1].
    expect(await send(arrays)).toEqual([{ jsonrpc: '2.0', id: null, error: expect.objectContaining({ code: -32600 }) }]);

    const objects = '{"jsonrpc":"2.0","id":"o","method":"echo","params":' + '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000) + '}';
    expect(await one(objects)).toMatchObject({ id: 'o', error: { code: -32600 } });

    const bare = '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000);
    expect(await one(bare)).toMatchObject({ id: null, error: { code: -32600 } });
  });

  test('a too-deep notification is dropped without a reply', async () => {
    const text = JSON.stringify({ jsonrpc: '2.0', method: 'note', params: nested(50) });
    notified.length = 0;
    expect(await send(text)).toBeUndefined();
    expect(notified).toEqual([]);
  });

  test('in a batch, only the too-deep element is refused; the rest are served', async () => {
    const batch = `[{"jsonrpc":"2.0","id":1,"method":"ping"},${requestOfDepth(9, 2)},{"jsonrpc":"2.0","id":3,"method":"ping"}]`;
    const replies = (await send(batch)) as Reply[];
    expect(replies).toEqual([
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', id: 2, error: expect.objectContaining({ code: -32600 }) },
      { jsonrpc: '2.0', id: 3, result: {} },
    ]);
  });
});

describe('batch size', () => {
  test('maxBatch elements are served; one more is a single -32600 naming the limit', async () => {
    const batch = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' })));
    expect(await send(batch(5))).toHaveLength(5);
    expect(await one(batch(6))).toMatchObject({ id: null, error: { code: -32600, data: { limit: 5 } } });
  });
});

describe('error translation', () => {
  test('a result JSON cannot express becomes -32603, not a crash', async () => {
    expect(await one('{"jsonrpc":"2.0","id":1,"method":"bigint"}')).toMatchObject({ id: 1, error: { code: -32603 } });
    expect(await one('{"jsonrpc":"2.0","id":2,"method":"circular"}')).toMatchObject({ id: 2, error: { code: -32603 } });
    // In a batch, the rest of the batch keeps its results.
    const replies = (await send('[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"bigint"}]')) as Reply[];
    expect(replies.map(asResponse)).toEqual([
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', id: 2, error: expect.objectContaining({ code: -32603 }) },
    ]);
  });

  test('a handler returning nothing still gets a result member (null)', async () => {
    expect(await send('{"jsonrpc":"2.0","id":1,"method":"nothing"}')).toEqual({ jsonrpc: '2.0', id: 1, result: null });
  });

  test.each(['crash', 'crash-async', 'tool-error'])('an unexpected throw (%s) is -32603 "Internal error" with no detail', async (method) => {
    const reply = await one(JSON.stringify({ jsonrpc: '2.0', id: 9, method }));
    expect(reply).toEqual({ jsonrpc: '2.0', id: 9, error: { code: -32603, message: 'Internal error' } });
    // The caller sees no detail; the log gets the cause.
    expect(unexpected).toEqual([{ err: expect.any(Error), method }]);
  });

  test('a result that cannot be serialized reaches the log with its cause', async () => {
    await one('{"jsonrpc":"2.0","id":1,"method":"bigint"}');
    expect(unexpected).toEqual([{ err: expect.any(TypeError), method: 'serializing a reply' }]);
  });

  test("a ProtocolError is the caller's business, not the log's", async () => {
    await one('{"jsonrpc":"2.0","id":"d","method":"denied"}');
    expect(unexpected).toEqual([]);
  });

  test('a ProtocolError keeps its code, message and data', async () => {
    expect(await one('{"jsonrpc":"2.0","id":"d","method":"denied"}')).toEqual({
      jsonrpc: '2.0',
      id: 'd',
      error: { code: -32003, message: 'Permission denied', data: { permission: 'file:write' } },
    });
  });

  test('a notification whose handler throws gets no reply', async () => {
    expect(await send('{"jsonrpc":"2.0","method":"note-crash"}')).toBeUndefined();
    expect(await send('[{"jsonrpc":"2.0","method":"note-crash"},{"jsonrpc":"2.0","method":"note","params":[1]}]')).toBeUndefined();
  });
});

describe('unknown methods', () => {
  test('a name close to a known method gets a suggestion, as an unknown tool does', async () => {
    expect(await one('{"jsonrpc":"2.0","id":1,"method":"pnig"}')).toEqual({
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32601, message: 'Method not found: pnig. Did you mean ping?' },
    });
  });

  test('a name near nothing, or too long to compare, is plain "Method not found"', async () => {
    expect((await one('{"jsonrpc":"2.0","id":1,"method":"foobar"}')).error?.message).toBe('Method not found: foobar');
    const long = `ping${'x'.repeat(100)}`;
    expect((await one(JSON.stringify({ jsonrpc: '2.0', id: 2, method: long }))).error?.message).toBe(`Method not found: ${long}`);
  });
});
