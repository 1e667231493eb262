/**
 * MCP 2026-07-28 beside the legacy era (DESIGN §3), as one suite every transport without HTTP
 * headers runs (in memory, the stdio binary): a request carrying the modern `_meta` envelope is
 * served statelessly by 2026-07-28 rules; the same server still answers legacy requests as before.
 */
import { call, PeerFactory, WirePeer } from './wire';

export const MODERN = '2026-07-28';
const PV = 'io.modelcontextprotocol/protocolVersion';
const CAPS = 'io.modelcontextprotocol/clientCapabilities';
const INFO = 'io.modelcontextprotocol/clientInfo';
const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';

/** The envelope a modern client attaches to every request. */
export const envelope = (version = MODERN) => ({ [PV]: version, [CAPS]: {}, [INFO]: { name: 'jest', version: '1.0.0' } });
const modern = (params: Record<string, unknown> = {}, meta: Record<string, unknown> = envelope()) => ({ ...params, _meta: meta });

const textOf = (result: unknown): string => ((result as { content?: Array<{ text: string }> }).content ?? []).map((c) => c.text).join('\n');

/** `tasks`: whether this server offers MCP tasks (then discover lists the extension, as `{}`). */
export function describeModernEra(label: string, makePeer: PeerFactory, options: { tasks: boolean }): void {
  describe(`MCP 2026-07-28 beside the legacy era (${label})`, () => {
    let peer: WirePeer;
    let limited: WirePeer;
    beforeAll(async () => {
      [peer, limited] = await Promise.all([makePeer(), makePeer({ permissions: ['file:read'] })]);
    });
    afterAll(async () => {
      await Promise.all([peer?.close(), limited?.close()]);
    });

    test('server/discover: every supported version (modern first, then legacy), capabilities with extensions, identity, cache fields', async () => {
      const reply = await call(peer, 'server/discover', modern());
      expect(reply.error).toBeUndefined();
      expect(reply.result).toEqual({
        supportedVersions: ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'],
        capabilities: { tools: { listChanged: false }, extensions: options.tasks ? { 'io.modelcontextprotocol/tasks': {} } : {} },
        ttlMs: expect.any(Number),
        cacheScope: 'public',
        resultType: 'complete',
        _meta: { [SERVER_INFO]: { name: 'toolgate', version: expect.any(String) } },
      });
    });

    test('a modern request without the protocol version or the capabilities in _meta → -32602 naming the field', async () => {
      const noVersion = await call(peer, 'tools/list', modern({}, { [CAPS]: {} }));
      expect(noVersion.error).toMatchObject({ code: -32602, message: expect.stringContaining(PV) });
      const noCaps = await call(peer, 'tools/list', modern({}, { [PV]: MODERN }));
      expect(noCaps.error).toMatchObject({ code: -32602, message: expect.stringContaining(CAPS) });
      const discoverBare = await call(peer, 'server/discover', {});
      expect(discoverBare.error?.code).toBe(-32602);
    });

    test.each(['1900-01-01', '2099-12-31', 'latest'])('an unsupported version (%s) → -32022 with data.supported and data.requested', async (version) => {
      const reply = await call(peer, 'tools/list', modern({}, envelope(version)));
      expect(reply.error).toMatchObject({ code: -32022, data: { supported: expect.arrayContaining([MODERN, '2025-11-25']), requested: version } });
    });

    test('tools/list: resultType, server identity, ttlMs, cacheScope private (it varies by token), the same order every time', async () => {
      const first = (await call(peer, 'tools/list', modern())).result as Record<string, unknown> & { tools: Array<{ name: string }> };
      expect(first).toMatchObject({ resultType: 'complete', cacheScope: 'private', ttlMs: expect.any(Number), _meta: { [SERVER_INFO]: { name: 'toolgate' } } });
      expect(first.ttlMs as number).toBeGreaterThan(0);
      const again = (await call(peer, 'tools/list', modern())).result as { tools: Array<{ name: string }> };
      expect(again.tools.map((t) => t.name)).toEqual(first.tools.map((t) => t.name));
      const mine = (await call(limited, 'tools/list', modern())).result as { tools: Array<{ name: string }> };
      expect(mine.tools.map((t) => t.name).sort()).toEqual(['read_file', 'read_multiple_files', 'search_text']);
    });

    test('tools/call: a complete result with identity; failures keep their legacy shapes', async () => {
      const ok = await call(peer, 'tools/call', modern({ name: 'write_file', arguments: { path: 'modern.txt', content: 'hi' } }));
      expect(ok.result).toMatchObject({ resultType: 'complete', _meta: { [SERVER_INFO]: { name: 'toolgate' } } });
      expect((ok.result as { isError?: boolean }).isError).toBeFalsy();
      const read = await call(peer, 'tools/call', modern({ name: 'read_file', arguments: { path: 'modern.txt' } }));
      expect(textOf(read.result)).toContain('hi');

      const unknown = await call(peer, 'tools/call', modern({ name: 'no_such_tool', arguments: {} }));
      expect(unknown.error).toMatchObject({ code: -32602, message: expect.stringContaining('no_such_tool') });
      const denied = await call(limited, 'tools/call', modern({ name: 'write_file', arguments: { path: 'x', content: 'y' } }));
      expect(denied.error).toMatchObject({ code: -32003, data: { permission: 'file:write' } });
      const invalid = await call(peer, 'tools/call', modern({ name: 'read_file', arguments: { path: 5 } }));
      expect(invalid.result).toMatchObject({ isError: true, resultType: 'complete' });
    });

    test('methods 2026-07-28 removed are not found for modern requests, and unchanged for legacy ones', async () => {
      expect((await call(peer, 'ping', modern())).error).toMatchObject({ code: -32601, message: expect.stringContaining('ping') });
      expect((await call(peer, 'logging/setLevel', modern({ level: 'info' }))).error?.code).toBe(-32601);
      expect((await call(peer, 'ping')).result).toEqual({});
      expect((await call(peer, 'logging/setLevel', { level: 'info' })).error?.code).toBe(-32601);
    });

    test('server/discover is modern-only: a legacy version in its _meta gets -32022 listing ours', async () => {
      const reply = await call(peer, 'server/discover', modern({}, envelope('2025-11-25')));
      expect(reply.error).toMatchObject({ code: -32022, data: { requested: '2025-11-25' } });
    });

    test('legacy requests on the same connection are served as before: no resultType, no cache fields', async () => {
      const init = await call(peer, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'old', version: '1' } });
      expect(init.result).toMatchObject({ protocolVersion: '2025-11-25' });
      const list = (await call(peer, 'tools/list')).result as Record<string, unknown>;
      expect(list).not.toHaveProperty('resultType');
      expect(list).not.toHaveProperty('ttlMs');
      // A modern request right after is still modern: no state is kept between requests.
      expect((await call(peer, 'tools/list', modern())).result).toMatchObject({ resultType: 'complete' });
    });
  });
}
