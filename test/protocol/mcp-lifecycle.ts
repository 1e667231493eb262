/**
 * The MCP methods toolgate answers (the README's Protocol section), as one suite every transport runs: version
 * negotiation, stateless `tools/list`, `server/discover`, `ping`, and the three ways a
 * `tools/call` can be refused (unknown tool, missing permission, bad arguments).
 */
import { call, PeerFactory, probe, WirePeer } from './wire';

interface ListedTool {
  name: string;
  inputSchema: { type: string };
}

const textOf = (result: unknown): string => ((result as { content: Array<{ type: string; text: string }> }).content ?? []).map((c) => c.text).join('\n');

export function describeMcpLifecycle(label: string, makePeer: PeerFactory): void {
  describe(`MCP lifecycle (${label})`, () => {
    let peer: WirePeer;
    beforeAll(async () => {
      peer = await makePeer();
    });
    afterAll(async () => {
      await peer?.close();
    });

    test('tools/list works before (and without) initialize', async () => {
      const reply = await call(peer, 'tools/list');
      const tools = (reply.result as { tools: ListedTool[] }).tools;
      expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['read_file', 'write_file', 'list_directory']));
      for (const t of tools) expect(t.inputSchema.type).toBe('object');
    });

    test.each(['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'])('initialize echoes supported version %s', async (version) => {
      const reply = await call(peer, 'initialize', {
        protocolVersion: version,
        capabilities: {},
        clientInfo: { name: 'jest', version: '1.0.0' },
      });
      expect(reply.result).toMatchObject({
        protocolVersion: version,
        capabilities: { tools: {} },
        serverInfo: { name: 'toolgate', version: expect.any(String) },
      });
    });

    test.each([['2099-01-01'], ['2024-10-07'], [''], [20251125], [null]])('initialize answers an unsupported version (%p) with 2025-11-25', async (version) => {
      const reply = await call(peer, 'initialize', { protocolVersion: version, capabilities: {}, clientInfo: { name: 'jest', version: '1' } });
      expect((reply.result as { protocolVersion: string }).protocolVersion).toBe('2025-11-25');
    });

    test('notifications/initialized gets no reply', async () => {
      await peer.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      expect(await probe(peer)).toEqual([]);
    });

    test('ping → {}', async () => {
      expect((await call(peer, 'ping')).result).toEqual({});
    });

    test('server/discover without the modern _meta envelope → -32602 (it is a 2026-07-28 method)', async () => {
      const reply = await call(peer, 'server/discover', {});
      expect(reply.error?.code).toBe(-32602);
    });

    test('tools/call with an unknown tool → -32602', async () => {
      const reply = await call(peer, 'tools/call', { name: 'no_such_tool', arguments: {} });
      expect(reply.error?.code).toBe(-32602);
      expect(reply.error?.message).toContain('no_such_tool');
    });

    test('a method one slip from a known one (tool/list) → -32601 suggesting it, as an unknown tool gets', async () => {
      const reply = await call(peer, 'tool/list');
      expect(reply.error).toMatchObject({ code: -32601, message: expect.stringMatching(/^Method not found: tool\/list\. Did you mean tools\/list\?$/) });
    });

    test('tools/call without a name → -32602', async () => {
      expect((await call(peer, 'tools/call', { arguments: {} })).error?.code).toBe(-32602);
      expect((await call(peer, 'tools/call', [1, 2])).error?.code).toBe(-32602);
    });

    test('arguments failing the schema → an isError result naming the field', async () => {
      const wrongType = await call(peer, 'tools/call', { name: 'read_file', arguments: { path: 5 } });
      expect(wrongType.error).toBeUndefined();
      expect(wrongType.result).toMatchObject({ isError: true });
      expect(textOf(wrongType.result)).toMatch(/\bpath\b/);

      const missing = await call(peer, 'tools/call', { name: 'write_file', arguments: { path: 'a.txt' } });
      expect(missing.result).toMatchObject({ isError: true });
      expect(textOf(missing.result)).toMatch(/\bcontent\b/);

      const notObject = await call(peer, 'tools/call', { name: 'read_file', arguments: 'a.txt' });
      expect(notObject.result).toMatchObject({ isError: true });
    });

    test('a tool that fails while running → an isError result, and the server goes on', async () => {
      const reply = await call(peer, 'tools/call', { name: 'read_file', arguments: { path: 'does-not-exist.txt' } });
      expect(reply.result).toMatchObject({ isError: true });
      expect(textOf(reply.result)).toContain('does-not-exist.txt');
      expect(await probe(peer)).toEqual([]);
    });

    test('write, read and list round-trip with structuredContent', async () => {
      const write = await call(peer, 'tools/call', { name: 'write_file', arguments: { path: 'dir/hello.txt', content: 'hi ☃' } });
      expect(write.result).toMatchObject({ structuredContent: { path: 'dir/hello.txt', bytesWritten: 6 } });
      const read = await call(peer, 'tools/call', { name: 'read_file', arguments: { path: 'dir/hello.txt' } });
      expect(read.result).toMatchObject({ structuredContent: { content: 'hi ☃', truncated: false } });
      const list = await call(peer, 'tools/call', { name: 'list_directory', arguments: { path: 'dir', details: true } });
      expect(list.result).toMatchObject({ structuredContent: { entries: [{ name: 'hello.txt', type: 'file', size: 6 }] } });
    });

    describe('with only file:read', () => {
      let limited: WirePeer;
      beforeAll(async () => {
        limited = await makePeer({ permissions: ['file:read'] });
      });
      afterAll(async () => {
        await limited?.close();
      });

      test('tools/list shows only the tools the caller may use', async () => {
        const tools = ((await call(limited, 'tools/list')).result as { tools: ListedTool[] }).tools;
        // The README's Permissions table: file:read grants exactly the content readers.
        expect(tools.map((t) => t.name).sort()).toEqual(['read_file', 'read_multiple_files', 'search_text']);
      });

      test('tools/call for a tool the caller lacks → -32003 naming the permission', async () => {
        const reply = await call(limited, 'tools/call', { name: 'write_file', arguments: { path: 'x.txt', content: 'no' } });
        expect(reply.error?.code).toBe(-32003);
        expect(reply.error?.data).toMatchObject({ permission: 'file:write', tool: 'write_file' });
        // The refusal comes before the arguments are even looked at.
        const bad = await call(limited, 'tools/call', { name: 'list_directory', arguments: { path: 42 } });
        expect(bad.error?.code).toBe(-32003);
      });

      test('a permitted tool still runs', async () => {
        const reply = await call(limited, 'tools/call', { name: 'read_file', arguments: { path: 'missing.txt' } });
        expect(reply.result).toMatchObject({ isError: true });
      });
    });
  });
}
