/**
 * The executor's reply on the Redis bus, as the gateway decodes it: a result keeps its JSON text
 * (the JSON-RPC reply splices it) only when the message is exactly what `encodeReply` writes;
 * anything else is decoded the general way, and the reply text is the same either way.
 */
import { decodeReply, encodeReply } from '../../shared/bus/redis-wire';
import { serialize } from '../../shared/protocol/dispatcher';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import { knownJson } from '../../shared/protocol/known-json';
import type { ToolResult } from '../../shared/tools/tool';

const result: ToolResult = {
  content: [{ type: 'text', text: 'line "one"\nline two \u2028 é 😀 \\ </script>' }],
  structuredContent: { size: 1.5, nothing: null, list: [1, { deep: true }] },
};

const reply = (id: number | string, value: unknown) => serialize({ jsonrpc: '2.0', id, result: value });

describe('the reply wire (executor → gateway)', () => {
  it("splices a result's own JSON text into the JSON-RPC reply, byte for byte what serializing gives", () => {
    const decoded = decodeReply(encodeReply('6f1c2a9e-3b7d-4c55-9d1e-0a2b3c4d5e6f', { result }));
    expect(decoded).toMatchObject({ id: '6f1c2a9e-3b7d-4c55-9d1e-0a2b3c4d5e6f', outcome: { result }, unreported: false });
    const decodedResult = (decoded!.outcome as { result: ToolResult }).result;
    expect(knownJson(decodedResult)).toBe(JSON.stringify(result));
    expect(reply(7, decodedResult)).toBe(JSON.stringify({ jsonrpc: '2.0', id: 7, result }));
    expect(reply('a"b', decodedResult)).toBe(JSON.stringify({ jsonrpc: '2.0', id: 'a"b', result }));
  });

  it('freezes a spliced result all the way down, so its text cannot go stale', () => {
    const decoded = decodeReply(encodeReply('job-1', { result }))!;
    const r = (decoded.outcome as { result: ToolResult }).result;
    expect(() => {
      (r as { isError?: boolean }).isError = true;
    }).toThrow(TypeError);
    expect(() => {
      (r.structuredContent!.list as Array<{ deep: boolean }>)[1]!.deep = false;
    }).toThrow(TypeError);
    expect(reply(1, r)).toBe(JSON.stringify({ jsonrpc: '2.0', id: 1, result }));
  });

  it('decodes any other message the general way: errors, trailing members, duplicate keys, escaped ids', () => {
    const error = decodeReply(encodeReply('job-2', { error: new ProtocolError(ErrorCode.Timeout, 'Timeout: x') }, true));
    expect(error).toMatchObject({ id: 'job-2', unreported: true });
    expect((error!.outcome as { error: ProtocolError }).error).toMatchObject({ code: ErrorCode.Timeout, message: 'Timeout: x' });
    // Last member wins, as JSON.parse has it; nothing of the first "result" reaches the reply.
    const twice = decodeReply('{"id":"job-3","ok":true,"result":{"a":1},"result":{"b":2}}')!;
    expect(knownJson((twice.outcome as { result: unknown }).result)).toBeUndefined();
    expect(reply(1, (twice.outcome as { result: unknown }).result)).toBe('{"jsonrpc":"2.0","id":1,"result":{"b":2}}');
    const trailing = decodeReply('{"id":"job-4","ok":true,"result":{"a":1},"x":"}"}')!;
    expect(reply(1, (trailing.outcome as { result: unknown }).result)).toBe('{"jsonrpc":"2.0","id":1,"result":{"a":1}}');
    expect(decodeReply('{"id":"job\\"5","ok":true,"result":3}')).toMatchObject({ id: 'job"5', outcome: { result: 3 } });
    expect(decodeReply('{"id":"job-6","ok":true,"result":')).toBeUndefined();
    expect(decodeReply('not json')).toBeUndefined();
  });
});
