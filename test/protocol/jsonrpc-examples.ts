/**
 * The examples of the JSON-RPC 2.0 specification (§7, https://www.jsonrpc.org/specification),
 * as one suite every transport runs. The spec's methods are mapped onto ours: `subtract` and
 * `sum` → `ping` (which ignores its params), `get_data` → `initialize`, the second call of the
 * mixed batch → `tools/list`; `foobar` / `foo.get` stay unknown (-32601), `update` / `notify_*`
 * stay notifications nobody handles (no reply).
 */
import { call, nextBatch, nextResponse, PeerFactory, probe, Reply, WirePeer } from './wire';

const byId = (a: Reply, b: Reply) => String(a.id).localeCompare(String(b.id));

export function describeJsonRpcExamples(label: string, makePeer: PeerFactory): void {
  describe(`JSON-RPC 2.0 specification examples (${label})`, () => {
    let peer: WirePeer;
    beforeAll(async () => {
      peer = await makePeer();
    });
    afterAll(async () => {
      await peer?.close();
    });
    afterEach(async () => {
      // Every example leaves the connection serving, with nothing left unread.
      expect(await probe(peer)).toEqual([]);
    });

    test('positional parameters: the number id is echoed', async () => {
      await peer.send('{"jsonrpc": "2.0", "method": "ping", "params": [42, 23], "id": 1}');
      expect(await nextResponse(peer)).toEqual({ jsonrpc: '2.0', result: {}, id: 1 });
      await peer.send('{"jsonrpc": "2.0", "method": "ping", "params": [23, 42], "id": 2}');
      expect(await nextResponse(peer)).toEqual({ jsonrpc: '2.0', result: {}, id: 2 });
    });

    test('named parameters: the id is echoed', async () => {
      await peer.send('{"jsonrpc": "2.0", "method": "ping", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}');
      expect(await nextResponse(peer)).toEqual({ jsonrpc: '2.0', result: {}, id: 3 });
      await peer.send('{"jsonrpc": "2.0", "method": "ping", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}');
      expect(await nextResponse(peer)).toEqual({ jsonrpc: '2.0', result: {}, id: 4 });
    });

    test('ids are echoed exactly: strings, numbers (zero, negative, fractional, large), null', async () => {
      for (const id of ['1', 'abc-☃', '', 0, -7, 1.5, 9007199254740991, null]) {
        await peer.send(JSON.stringify({ jsonrpc: '2.0', method: 'ping', id }));
        const reply = await nextResponse(peer);
        expect(reply).toEqual({ jsonrpc: '2.0', result: {}, id });
        expect(typeof reply.id).toBe(typeof id);
      }
    });

    test('a notification gets no reply', async () => {
      await peer.send('{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}');
      await peer.send('{"jsonrpc": "2.0", "method": "foobar"}');
      // A notification naming a real method still gets no reply.
      await peer.send('{"jsonrpc": "2.0", "method": "ping"}');
      await peer.send('{"jsonrpc": "2.0", "method": "tools/list"}');
      expect(await probe(peer)).toEqual([]);
    });

    test('a non-existent method: -32601 with the id', async () => {
      await peer.send('{"jsonrpc": "2.0", "method": "foobar", "id": "1"}');
      const reply = await nextResponse(peer);
      expect(reply.id).toBe('1');
      expect(reply.error?.code).toBe(-32601);
      expect(reply.error?.message).toMatch(/^Method not found/);
    });

    test('invalid JSON: -32700 with id null', async () => {
      await peer.send('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]');
      const reply = await nextResponse(peer);
      expect(reply.id).toBeNull();
      expect(reply.error?.code).toBe(-32700);
      expect(reply.error?.message).toMatch(/^Parse error/);
    });

    test('an invalid Request object: -32600 with id null', async () => {
      await peer.send('{"jsonrpc": "2.0", "method": 1, "params": "bar"}');
      const reply = await nextResponse(peer);
      expect(reply.id).toBeNull();
      expect(reply.error?.code).toBe(-32600);
      expect(reply.error?.message).toMatch(/^Invalid Request/);
    });

    test('a batch that is invalid JSON: one -32700, not an array', async () => {
      await peer.send('[\n  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},\n  {"jsonrpc": "2.0", "method"\n]'.replace(/\n/g, ' '));
      const reply = await nextResponse(peer);
      expect(reply.id).toBeNull();
      expect(reply.error?.code).toBe(-32700);
    });

    test('an empty array: one -32600, not an array', async () => {
      await peer.send('[]');
      const reply = await nextResponse(peer);
      expect(reply.id).toBeNull();
      expect(reply.error?.code).toBe(-32600);
    });

    test('[1]: an array of one -32600', async () => {
      await peer.send('[1]');
      const replies = await nextBatch(peer);
      expect(replies).toHaveLength(1);
      expect(replies[0]).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    });

    test('[1,2,3]: an array of three -32600', async () => {
      await peer.send('[1,2,3]');
      const replies = await nextBatch(peer);
      expect(replies).toHaveLength(3);
      for (const r of replies) expect(r).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    });

    test('a mixed batch: one reply per request, none for the notification', async () => {
      await peer.send(
        JSON.stringify([
          { jsonrpc: '2.0', method: 'ping', params: [1, 2, 4], id: '1' },
          { jsonrpc: '2.0', method: 'notify_hello', params: [7] },
          { jsonrpc: '2.0', method: 'tools/list', params: {}, id: '2' },
          { foo: 'boo' },
          { jsonrpc: '2.0', method: 'foo.get', params: { name: 'myself' }, id: '5' },
          { jsonrpc: '2.0', method: 'initialize', id: '9' },
        ]),
      );
      const replies = (await nextBatch(peer)).sort(byId);
      expect(replies.map((r) => r.id)).toEqual(['1', '2', '5', '9', null].sort((a, b) => String(a).localeCompare(String(b))));
      const get = (id: string | null) => replies.find((r) => r.id === id)!;
      expect(get('1').result).toEqual({});
      expect(Array.isArray((get('2').result as { tools: unknown[] }).tools)).toBe(true);
      expect(get(null).error?.code).toBe(-32600);
      expect(get('5').error?.code).toBe(-32601);
      expect((get('9').result as { protocolVersion: string }).protocolVersion).toBe('2025-11-25');
    });

    test('a batch of only notifications: no reply at all', async () => {
      await peer.send('[{"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]}, {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]');
      expect(await probe(peer)).toEqual([]);
    });

    test('a batch reply keeps each id with its own result', async () => {
      const batch = Array.from({ length: 20 }, (_, i) =>
        i % 2 === 0 ? { jsonrpc: '2.0', method: 'ping', id: i } : { jsonrpc: '2.0', method: 'nope', id: `s${i}` },
      );
      await peer.send(JSON.stringify(batch));
      const replies = await nextBatch(peer);
      expect(replies).toHaveLength(20);
      for (const r of replies) {
        if (typeof r.id === 'number') expect(r.result).toEqual({});
        else expect(r.error?.code).toBe(-32601);
      }
      expect(new Set(replies.map((r) => r.id)).size).toBe(20);
    });

    test('other invalid Request objects echo a well-formed id, else null', async () => {
      const cases: Array<[string, string | number | null]> = [
        ['{"jsonrpc": "1.0", "method": "ping", "id": 11}', 11],
        ['{"method": "ping", "id": "no-version"}', 'no-version'],
        ['{"jsonrpc": "2.0", "id": 12}', 12],
        ['{"jsonrpc": "2.0", "method": "ping", "params": "bar", "id": 13}', 13],
        ['{"jsonrpc": "2.0", "method": "ping", "params": 5, "id": 14}', 14],
        ['{"jsonrpc": "2.0", "method": "ping", "id": {"a": 1}}', null],
        ['{"jsonrpc": "2.0", "method": "ping", "id": true}', null],
        ['{"jsonrpc": "2.0", "method": "ping", "id": [1]}', null],
        ['"ping"', null],
        ['42', null],
        ['null', null],
      ];
      for (const [frame, id] of cases) {
        await peer.send(frame);
        const reply = await nextResponse(peer);
        expect({ frame, id: reply.id, code: reply.error?.code }).toEqual({ frame, id, code: -32600 });
      }
    });

    test('requests run concurrently and every reply carries its own id', async () => {
      const ids = Array.from({ length: 50 }, (_, i) => `c${i}`);
      for (const id of ids) await peer.send(JSON.stringify({ jsonrpc: '2.0', method: id.endsWith('7') ? 'missing' : 'ping', id }));
      const seen = new Map<unknown, Reply>();
      for (let i = 0; i < ids.length; i++) {
        const r = await nextResponse(peer);
        seen.set(r.id, r);
      }
      expect([...seen.keys()].sort()).toEqual([...ids].sort());
      expect(seen.get('c7')?.error?.code).toBe(-32601);
      expect(seen.get('c8')?.result).toEqual({});
    });

    test('a response sent to the server is ignored', async () => {
      await peer.send('{"jsonrpc": "2.0", "result": 19, "id": 77}');
      await peer.send('{"jsonrpc": "2.0", "error": {"code": -1, "message": "x"}, "id": 78}');
      expect(await probe(peer)).toEqual([]);
      // …and a call right after is answered normally.
      expect((await call(peer, 'ping')).result).toEqual({});
    });
  });
}
