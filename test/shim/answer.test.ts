/**
 * The shim's translation from a POST's outcome to the stdout line, in memory: which ids a frame
 * owes, and that each of them is answered exactly once whatever came back.
 */
import { answer, PostOutcome } from '../../shim/answer';
import { inspectFrame } from '../../shim/frame';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';

const WHERE = 'http://127.0.0.1:1/';
const http = (status: number, body: unknown): PostOutcome => ({ kind: 'http', status, body: typeof body === 'string' ? body : JSON.stringify(body) });
const frameOf = (payload: unknown) => inspectFrame(payload);
const parsed = (line: string | undefined) => (line === undefined ? undefined : (JSON.parse(line) as unknown));

describe('inspectFrame', () => {
  test('requests owe a reply; notifications and responses do not; invalid messages with an id do', () => {
    const info = frameOf([
      { jsonrpc: '2.0', id: 1, method: 'a' },
      { jsonrpc: '2.0', method: 'n' },
      { jsonrpc: '2.0', id: 'r', result: {} },
      { jsonrpc: '1.0', id: 'old', method: 'a' },
      { jsonrpc: '2.0', id: { bad: true }, method: 'a' },
      { jsonrpc: '2.0', id: null, method: 'a' },
      42,
    ]);
    expect(info).toEqual({ batch: true, ids: [1, 'old', null], cancels: [], headers: {} });
  });

  test('cancellations are found alone and inside a batch', () => {
    const cancel = (requestId: unknown) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } });
    expect(frameOf(cancel(3))).toEqual({ batch: false, ids: [], cancels: [3], headers: {} });
    expect(frameOf([cancel('x'), cancel({ no: 1 }), { jsonrpc: '2.0', method: 'notifications/cancelled' }]).cancels).toEqual(['x']);
  });
});

describe('inspectFrame: the 2026-07-28 headers a modern message needs over HTTP', () => {
  const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
  test('mirrored from the body: version, method, and the tool name for tools/call', () => {
    expect(frameOf({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read_file', _meta: meta } }).headers).toEqual({
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'read_file',
    });
    expect(frameOf({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: meta } }).headers).toEqual({
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/list',
    });
  });
  test('a name that is not header-safe (non-ASCII, edge spaces, the sentinel itself) travels base64-encoded', () => {
    const name = (n: string) => frameOf({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: n, _meta: meta } }).headers['mcp-name'];
    expect(name('héllo')).toBe(`=?base64?${Buffer.from('héllo').toString('base64')}?=`);
    expect(name(' padded ')).toBe('=?base64?IHBhZGRlZCA=?=');
    expect(name('=?base64?literal?=')).toBe('=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=');
  });
  test('legacy messages and batches carry none', () => {
    expect(frameOf({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x' } }).headers).toEqual({});
    expect(frameOf([{ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: meta } }]).headers).toEqual({});
  });
});

describe('answer', () => {
  test('a complete reply in the right shape passes through as it came (trimmed)', () => {
    const text = '{"jsonrpc":"2.0","id":1,"result":{"b":1,"a":2}}\n';
    expect(answer(frameOf({ jsonrpc: '2.0', id: 1, method: 'm' }), http(200, text), WHERE)).toBe(text.trim());
  });

  test('a batch answer to a single request is reshaped to the single response', () => {
    const line = answer(frameOf({ jsonrpc: '2.0', id: 1, method: 'm' }), http(200, [{ jsonrpc: '2.0', id: 1, result: 'x' }]), WHERE);
    expect(parsed(line)).toEqual({ jsonrpc: '2.0', id: 1, result: 'x' });
  });

  test('notifications: nothing, whatever happened', () => {
    const frame = frameOf({ jsonrpc: '2.0', method: 'n' });
    expect(answer(frame, http(202, ''), WHERE)).toBeUndefined();
    expect(answer(frame, http(500, 'boom'), WHERE)).toBeUndefined();
    expect(answer(frame, { kind: 'failed', error: new ProtocolError(ErrorCode.Unavailable, 'down') }, WHERE)).toBeUndefined();
  });

  test('a JSON reply to a frame that owes nothing is passed on (e.g. -32600 for an id-less invalid message)', () => {
    const reply = { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request' } };
    expect(parsed(answer(frameOf({ jsonrpc: '2.0' }), http(200, reply), WHERE))).toEqual(reply);
  });

  test('2xx with no body for a request: -32006', () => {
    expect(parsed(answer(frameOf({ jsonrpc: '2.0', id: 4, method: 'm' }), http(202, ''), WHERE))).toEqual({
      jsonrpc: '2.0',
      id: 4,
      error: { code: ErrorCode.Unavailable, message: `the gateway at ${WHERE} answered HTTP 202 with no reply` },
    });
  });

  test('cancelled: nothing', () => {
    expect(answer(frameOf({ jsonrpc: '2.0', id: 4, method: 'm' }), { kind: 'cancelled' }, WHERE)).toBeUndefined();
  });

  test('a failure carries its error object, data included, to every id', () => {
    const error = new ProtocolError(ErrorCode.MessageTooLarge, 'too big', { limit: 5 });
    expect(
      parsed(
        answer(
          frameOf([
            { jsonrpc: '2.0', id: 1, method: 'm' },
            { jsonrpc: '2.0', id: 1, method: 'm' },
          ]),
          { kind: 'failed', error },
          WHERE,
        ),
      ),
    ).toEqual([
      { jsonrpc: '2.0', id: 1, error: { code: ErrorCode.MessageTooLarge, message: 'too big', data: { limit: 5 } } },
      { jsonrpc: '2.0', id: 1, error: { code: ErrorCode.MessageTooLarge, message: 'too big', data: { limit: 5 } } },
    ]);
  });

  test('a refusal whose JSON is not a JSON-RPC error is described from its status', () => {
    const line = answer(frameOf({ jsonrpc: '2.0', id: 1, method: 'm' }), http(404, { error: 'not found' }), WHERE);
    expect(parsed(line)).toMatchObject({
      id: 1,
      error: { code: ErrorCode.Unavailable, message: `the gateway at ${WHERE} answered HTTP 404; is --url the gateway's address?` },
    });
  });
});
