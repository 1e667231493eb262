/**
 * `notifications/cancelled` (MCP): the running request's signal is aborted and the request gets
 * no reply, whatever the tool does next. Uses a test-only registry (run by a real LocalToolRunner)
 * with a tool that waits until it is released or cancelled.
 */
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import { ToolRegistry } from '../../shared/tools/registry';
import { textResult } from '../../shared/tools/result';
import { AnyTool, defineTool } from '../../shared/tools/tool';
import { MemoryPeer, memoryPeer } from './memory-peer';
import { call, nextResponse, probe } from './wire';

interface Gate {
  release(): void;
  aborted: Promise<unknown>;
}
const gates = new Map<string, Gate>();
const started = new Map<string, () => void>();
const whenStarted = (key: string) => new Promise<void>((resolve) => started.set(key, resolve));

/** Waits until released (→ "done") or aborted (→ resolves "stopped", or rejects when `reject`). */
const slow = defineTool({
  name: 'slow',
  description: 'Waits until the test releases or cancels it.',
  permission: 'file:read',
  host: 'sandbox',
  input: (z) => z.object({ key: z.string(), reject: z.boolean().default(false) }),
  annotations: { readOnlyHint: true },
  run({ key, reject }, { signal }) {
    return new Promise((resolve, fail) => {
      let onAbort!: (reason: unknown) => void;
      const aborted = new Promise<unknown>((r) => (onAbort = r));
      gates.set(key, { release: () => resolve(textResult('done')), aborted });
      signal.addEventListener('abort', () => {
        onAbort(signal.reason);
        if (reject) fail(signal.reason);
        else resolve(textResult('stopped'));
      });
      started.get(key)?.();
    });
  },
});

let peer: MemoryPeer;
beforeEach(async () => {
  // The default in-memory runner (a LocalToolRunner with a sandbox host) runs the test tool.
  peer = await memoryPeer({ registry: new ToolRegistry([slow] as unknown as AnyTool[]) });
});
afterEach(async () => {
  for (const gate of gates.values()) gate.release();
  gates.clear();
  await peer.close();
});

async function startSlow(id: string | number, key: string, reject = false): Promise<Gate> {
  const running = whenStarted(key);
  await peer.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'slow', arguments: { key, reject } } }));
  await running;
  return gates.get(key)!;
}
const cancel = (requestId: unknown, reason?: string) =>
  peer.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: reason === undefined ? { requestId } : { requestId, reason } }));

test('control: an uncancelled slow call replies once released', async () => {
  const gate = await startSlow(1, 'a');
  expect(await probe(peer)).toEqual([]);
  gate.release();
  const reply = await nextResponse(peer);
  expect(reply).toMatchObject({ id: 1, result: { content: [{ type: 'text', text: 'done' }] } });
});

test.each([
  ['a number id, tool resolves', 5, false],
  ['a string id, tool resolves', 'call-5', false],
  ['a number id, tool rejects with the abort reason', 6, true],
])('a cancelled request (%s) gets no reply', async (_label, id, reject) => {
  const gate = await startSlow(id, `k-${id}`, reject);
  await cancel(id, 'the user pressed stop');
  const reason = await gate.aborted;
  expect(reason).toBeInstanceOf(ProtocolError);
  expect((reason as ProtocolError).code).toBe(ErrorCode.Cancelled);
  expect((reason as ProtocolError).message).toContain('the user pressed stop');
  // The tool has finished; two round trips later there is still nothing for the cancelled id.
  expect(await probe(peer)).toEqual([]);
  expect(await probe(peer)).toEqual([]);
});

test('cancelling one call leaves a concurrent one to reply', async () => {
  const keep = await startSlow(10, 'keep');
  const drop = await startSlow(11, 'drop');
  await cancel(11);
  await drop.aborted;
  keep.release();
  expect(await nextResponse(peer)).toMatchObject({ id: 10, result: { content: [{ text: 'done' }] } });
  expect(await probe(peer)).toEqual([]);
});

test('a cancel naming the wrong type of id, an unknown id or no id changes nothing', async () => {
  const gate = await startSlow(20, 'typed');
  await cancel('20'); // the string "20" is not the number 20
  await cancel(999);
  await cancel(undefined);
  await peer.send('{"jsonrpc":"2.0","method":"notifications/cancelled"}');
  await peer.send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":[20]}');
  expect(await probe(peer)).toEqual([]);
  gate.release();
  expect(await nextResponse(peer)).toMatchObject({ id: 20, result: { content: [{ text: 'done' }] } });
});

test('a cancel for a request that already finished is ignored, and the id can be reused', async () => {
  const first = await startSlow(30, 'first');
  first.release();
  expect((await nextResponse(peer)).id).toBe(30);
  await cancel(30);
  expect(await probe(peer)).toEqual([]);
  const again = await call(peer, 'ping');
  expect(again.result).toEqual({});
});

test('the client going away aborts calls still running after the drain time', async () => {
  const gate = await startSlow(40, 'orphan');
  const closing = peer.close();
  expect(await gate.aborted).toBeInstanceOf(ProtocolError);
  await closing;
  peer = await memoryPeer(); // afterEach closes a fresh one
});
