/**
 * What a user of the official SDK 2.x client (`@modelcontextprotocol/client`) must get from
 * toolgate on every path (issue 10, "What it must show"): a client pinned to 2026-07-28 and one
 * in `auto` mode both settle on the modern era (no `initialize`), `server/discover` answers,
 * `tools/list` shows the token's tools, every tool family runs, and the three caller mistakes
 * (unknown tool, missing permission, bad arguments) come back as the errors a model can act on.
 *
 * One small .test.ts per deployment (stdio, serve on each bus, the shim) supplies a transport
 * factory; this suite builds the clients itself, so every path meets the same client options.
 * Each transport is wrapped to keep what crossed it (sent and received JSON-RPC), so the tests
 * also show the wire: the envelope on every request and the modern fields on every result.
 */
import { Client, ProtocolError, type JSONRPCMessage, type Transport } from '@modelcontextprotocol/client';
import { PERMISSIONS, type Permission } from '../../shared/auth/permissions';
import { ALL_TOOLS } from '../../shared/tools/index';
import { TOOLGATE_VERSION } from '../../shared/version';
import { httpServer, type TestServer } from '../tools/http/loopback';

export const MODERN = '2026-07-28';
const LEGACY = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];
const PV = 'io.modelcontextprotocol/protocolVersion';
const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';

export interface Sdk2Deployment {
  /**
   * A fresh, unstarted transport to toolgate for a caller holding exactly `permissions`, in a
   * tenant of its own (`tenant`) where tenants exist. The client owns it: closing the client
   * ends it (and any process it spawned).
   */
  transport(permissions: readonly Permission[], tenant: string): Transport;
  /** Stops everything the deployment started. */
  close(): Promise<void>;
  /** Over direct HTTP: every POST the clients made (headers and body), to check the 2026-07-28 headers. */
  posts?(): ReadonlyArray<{ headers: Headers; body: string }>;
  /** The deployment's own logs, for a failing test's message. */
  logs?(): string;
}

/** Settings every deployment passes to the toolgate processes it starts. */
export interface Sdk2Settings {
  /** TOOLGATE_HTTP_ALLOW: the suite's loopback listener, so http_request may reach it. */
  TOOLGATE_HTTP_ALLOW: string;
}

export type StartDeployment = (settings: Sdk2Settings) => Promise<Sdk2Deployment>;

/** The two negotiation modes a 2026-07-28 client uses; both must end on the modern era. */
const MODES = [
  ['pinned to 2026-07-28', { pin: MODERN }],
  ['auto', 'auto'],
] as const;

interface Wired {
  client: Client;
  sent: JSONRPCMessage[];
  received: JSONRPCMessage[];
}

type Rpc = { id?: unknown; method?: string; params?: Record<string, any>; result?: Record<string, any>; error?: { code: number; message: string; data?: any } };

/** The reply to the last request of `method` that crossed the transport. */
function replyTo(w: Wired, method: string): Rpc {
  const request = [...(w.sent as Rpc[])].reverse().find((m) => m.method === method && m.id !== undefined);
  if (!request) throw new Error(`no ${method} request crossed the transport; sent: ${w.sent.map((m) => (m as Rpc).method).join(', ')}`);
  const reply = (w.received as Rpc[]).find((m) => m.id === request.id && m.method === undefined);
  if (!reply) throw new Error(`no reply to ${method} (id ${String(request.id)}) crossed the transport`);
  return reply;
}

/** Keeps every message the client sends and receives through `transport`. */
function wire(transport: Transport, sent: JSONRPCMessage[], received: JSONRPCMessage[]): Transport {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    sent.push(message);
    return send(message, options);
  };
  // The client installs its handler in connect(); this accessor keeps ours in front of it.
  let handler: Transport['onmessage'];
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () =>
      handler &&
      ((message: JSONRPCMessage, extra?: unknown) => {
        received.push(message);
        (handler as (m: JSONRPCMessage, e?: unknown) => void)(message, extra);
      }),
    set: (h: Transport['onmessage']) => (handler = h),
  });
  return transport;
}

const textOf = (result: { content?: unknown }): string =>
  ((result.content ?? []) as Array<{ type: string; text?: string }>).map((c) => c.text ?? '').join('\n');

/** Awaits `promise` expecting a rejection, and returns the error (fails when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<ProtocolError> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!('error' in outcome)) throw new Error(`expected an error, got ${JSON.stringify(outcome.value).slice(0, 300)}`);
  expect(outcome.error).toBeInstanceOf(ProtocolError);
  return outcome.error as ProtocolError;
}

export function sdk2ClientContract(label: string, start: StartDeployment): void {
  describe(`the SDK 2.x client against ${label}`, () => {
    let target: TestServer;
    let deployment: Sdk2Deployment;
    const open: Client[] = [];

    beforeAll(async () => {
      target = await httpServer((req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(`hello from the loopback listener: ${req.method} ${req.url}`);
      });
      deployment = await start({ TOOLGATE_HTTP_ALLOW: `127.0.0.1:${target.port}` });
    });

    afterAll(async () => {
      await Promise.allSettled(open.map((c) => c.close()));
      await deployment?.close();
      await target?.close();
    });

    let tenants = 0;
    async function connect(mode: (typeof MODES)[number][1] | undefined, permissions: readonly Permission[]): Promise<Wired> {
      const sent: JSONRPCMessage[] = [];
      const received: JSONRPCMessage[] = [];
      const tenant = `sdk2-${process.pid}-${++tenants}`;
      const transport = wire(deployment.transport(permissions, tenant), sent, received);
      const client = new Client({ name: 'toolgate-sdk2-e2e', version: '1.0.0' }, mode === undefined ? {} : { versionNegotiation: { mode } });
      open.push(client);
      try {
        await client.connect(transport);
      } catch (err) {
        throw new Error(`connect failed: ${String(err)}\n${deployment.logs?.() ?? ''}`);
      }
      return { client, sent, received };
    }

    test('a client left in the default (legacy) mode still connects the 2025 way and works', async () => {
      const w = await connect(undefined, ['file:read', 'system:exec']);
      expect(w.client.getProtocolEra()).toBe('legacy');
      expect((w.sent as Rpc[]).map((m) => m.method)).toContain('initialize');
      const { tools } = await w.client.listTools();
      expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['read_file', 'run_command']));
      expect(tools.map((t) => t.name)).not.toContain('write_file');
      const run = await w.client.callTool({ name: 'run_command', arguments: { argv: ['echo', 'legacy'] } });
      expect(run.structuredContent).toMatchObject({ exitCode: 0, stdout: 'legacy\n' });
      // A legacy result carries none of the 2026-07-28 fields.
      expect(replyTo(w, 'tools/call').result).not.toHaveProperty('resultType');
      await w.client.close();
    });

    describe.each(MODES)('a client %s', (_name, mode) => {
      let full: Wired;
      let limited: Wired;
      beforeAll(async () => {
        [full, limited] = await Promise.all([connect(mode, PERMISSIONS), connect(mode, ['file:read', 'network:http'])]);
      });

      test('settles on the modern era: no initialize, the envelope on every request', async () => {
        for (const { client, sent } of [full, limited]) {
          expect(client.getProtocolEra()).toBe('modern');
          expect(client.getNegotiatedProtocolVersion()).toBe(MODERN);
          expect(client.getServerVersion()).toEqual({ name: 'toolgate', version: TOOLGATE_VERSION });
          expect((sent as Rpc[]).map((m) => m.method)).not.toContain('initialize');
        }
        await full.client.listTools();
        const requests = (full.sent as Rpc[]).filter((m) => m.method !== undefined && m.id !== undefined);
        expect(requests.length).toBeGreaterThan(0);
        for (const r of requests) expect(r.params?._meta?.[PV]).toBe(MODERN);
        // Over HTTP each modern POST also names its version and method in headers (the gateway compares them).
        const modernPosts = (deployment.posts?.() ?? []).filter((p) => (JSON.parse(p.body) as Rpc).params?._meta?.[PV] === MODERN);
        if (deployment.posts) expect(modernPosts.length).toBeGreaterThan(0);
        for (const post of modernPosts) {
          expect(post.headers.get('mcp-protocol-version')).toBe(MODERN);
          expect(post.headers.get('mcp-method')).toBe((JSON.parse(post.body) as Rpc).method);
        }
      });

      test('server/discover: modern and legacy versions, tools capability, identity and cache fields', async () => {
        const discovered = await full.client.discover();
        expect(discovered.supportedVersions).toEqual([MODERN, ...LEGACY]);
        expect(discovered.capabilities).toMatchObject({ tools: {}, extensions: {} });
        expect(full.client.getDiscoverResult()?.supportedVersions).toContain(MODERN);
        // On the wire: the 2026-07-28 result shape the SDK reads it from.
        expect(replyTo(full, 'server/discover').result).toMatchObject({
          resultType: 'complete',
          cacheScope: 'public',
          ttlMs: expect.any(Number),
          _meta: { [SERVER_INFO]: { name: 'toolgate', version: TOOLGATE_VERSION } },
        });
      });

      test('tools/list: all 19 tools for a full token, cacheable only by this caller', async () => {
        const { tools } = await full.client.listTools();
        const names = tools.map((t) => t.name);
        expect(names).toHaveLength(19);
        expect([...names].sort()).toEqual(ALL_TOOLS.map((t) => t.name).sort());
        for (const t of tools) expect(t.inputSchema.type).toBe('object');
        expect(replyTo(full, 'tools/list').result).toMatchObject({ resultType: 'complete', cacheScope: 'private', ttlMs: expect.any(Number) });
      });

      test('tools/list: a limited token sees only its permitted tools', async () => {
        const { tools } = await limited.client.listTools();
        expect(tools.map((t) => t.name).sort()).toEqual(['http_request', 'read_file', 'read_multiple_files', 'search_text']);
      });

      test('files: write_file then read_file, in the caller’s workspace', async () => {
        const file = `notes/${typeof mode === 'string' ? mode : 'pinned'}.txt`;
        const write = await full.client.callTool({ name: 'write_file', arguments: { path: file, content: 'modern era ☃\n' } });
        expect(write.isError).toBeFalsy();
        expect(write.structuredContent).toMatchObject({ path: file, bytesWritten: Buffer.byteLength('modern era ☃\n') });
        const read = await full.client.callTool({ name: 'read_file', arguments: { path: file } });
        expect(read.isError).toBeFalsy();
        expect(read.structuredContent).toMatchObject({ path: file, content: 'modern era ☃\n', truncated: false });
        expect(replyTo(full, 'tools/call').result).toMatchObject({ resultType: 'complete', _meta: { [SERVER_INFO]: { name: 'toolgate' } } });
      });

      test('commands: run_command echo', async () => {
        const run = await full.client.callTool({ name: 'run_command', arguments: { argv: ['echo', 'hello', 'modern'] } });
        expect(run.isError).toBeFalsy();
        expect(run.structuredContent).toMatchObject({ exitCode: 0, stdout: 'hello modern\n' });
      });

      test('http: http_request to an allowed loopback listener (a limited token with network:http)', async () => {
        const path = `/sdk2/${encodeURIComponent(String(typeof mode === 'string' ? mode : mode.pin))}`;
        const seen = target.seen.length;
        const fetched = await limited.client.callTool({ name: 'http_request', arguments: { url: `${target.url}${path}` } });
        expect(fetched.isError).toBeFalsy();
        expect(fetched.structuredContent).toMatchObject({ status: 200, body: `hello from the loopback listener: GET ${path}` });
        expect(target.seen.slice(seen).map((s) => s.url)).toEqual([path]);
      });

      test('an unknown tool: -32602 naming it', async () => {
        const err = await rejection(full.client.callTool({ name: 'no_such_tool', arguments: {} }));
        expect(err.code).toBe(-32602);
        expect(err.message).toContain('no_such_tool');
        // The server's answer, not the client's own guess.
        expect(replyTo(full, 'tools/call').error).toMatchObject({ code: -32602, message: expect.stringContaining('no_such_tool') });
      });

      test('an unknown tool whose name is not header-safe: still -32602 naming it (over HTTP, Mcp-Name goes base64-encoded)', async () => {
        const name = 'outil_été ☃';
        const err = await rejection(full.client.callTool({ name, arguments: {} }));
        expect(err.code).toBe(-32602);
        expect(err.message).toContain(name);
        const post = deployment.posts?.().find((p) => p.body.includes(name));
        if (deployment.posts) expect(post?.headers.get('mcp-name')).toBe(`=?base64?${Buffer.from(name).toString('base64')}?=`);
      });

      test('a missing permission: -32003 naming the tool and the permission', async () => {
        const err = await rejection(limited.client.callTool({ name: 'write_file', arguments: { path: 'x.txt', content: 'y' } }));
        expect(err.code).toBe(-32003);
        expect(err.message).toContain('file:write');
        expect(err.data).toEqual({ tool: 'write_file', permission: 'file:write' });
        const run = await rejection(limited.client.callTool({ name: 'run_command', arguments: { argv: ['true'] } }));
        expect(run).toMatchObject({ code: -32003, data: { permission: 'system:exec' } });
      });

      test('invalid arguments: an isError result naming the field', async () => {
        const bad = await full.client.callTool({ name: 'write_file', arguments: { path: 'x.txt' } });
        expect(bad.isError).toBe(true);
        expect(textOf(bad)).toMatch(/Invalid arguments for write_file: content\b/);
        // The client still works afterwards.
        expect((await full.client.callTool({ name: 'run_command', arguments: { argv: ['true'] } })).isError).toBeFalsy();
      });
    });
  });
}
