/**
 * The official MCP SDK client over Streamable HTTP against the gateway: connect (initialize,
 * notifications/initialized → 202, the SSE GET → 405, which the client accepts), list tools (the
 * SDK validates every listing), call tools (the SDK validates structuredContent against each
 * outputSchema), and the errors it surfaces for a denied permission and a missing token. Every
 * request the client sends is recorded, so the test also shows what crossed the wire.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { startTestGateway, TestGateway } from './harness';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(async () => {
  await gw?.close();
});

interface Seen {
  method: string;
  status: number;
  accept: string | null;
  protocolVersion: string | null;
}

function connect(token: string | undefined, seen: Seen[] = []): { client: Client; transport: StreamableHTTPClientTransport; seen: Seen[] } {
  const recordingFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const res = await fetch(input, init);
    const headers = new Headers(init?.headers);
    seen.push({ method: init?.method ?? 'GET', status: res.status, accept: headers.get('accept'), protocolVersion: headers.get('mcp-protocol-version') });
    return res;
  };
  const transport = new StreamableHTTPClientTransport(new URL(gw.url), {
    requestInit: token === undefined ? {} : { headers: { Authorization: `Bearer ${token}` } },
    fetch: recordingFetch,
  });
  const client = new Client({ name: 'toolgate-http-e2e', version: '1.0.0' });
  return { client, transport, seen };
}

test('connect, list, write, read, list — through the gateway, the bus and the sandbox', async () => {
  const { client, transport, seen } = connect(gw.token({ id: 'sdk-user' }));
  await client.connect(transport);
  try {
    expect(client.getServerVersion()).toMatchObject({ name: 'toolgate' });
    expect(client.getServerCapabilities()).toMatchObject({ tools: {} });

    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['read_file', 'write_file', 'list_directory', 'run_command', 'http_request']));

    const write = await client.callTool({ name: 'write_file', arguments: { path: 'sdk/hello.txt', content: 'hello over HTTP ☃\n' } });
    expect(write.isError).toBeFalsy();
    expect(write.structuredContent).toMatchObject({ path: 'sdk/hello.txt' });
    expect(await fs.readFile(path.join(gw.workspaceOf('sdk-user'), 'sdk/hello.txt'), 'utf8')).toBe('hello over HTTP ☃\n');

    const read = await client.callTool({ name: 'read_file', arguments: { path: 'sdk/hello.txt' } });
    expect(JSON.stringify(read.content)).toContain('hello over HTTP ☃');
    const list = await client.callTool({ name: 'list_directory', arguments: { path: 'sdk' } });
    expect(JSON.stringify(list.structuredContent)).toContain('hello.txt');
    const run = await client.callTool({ name: 'run_command', arguments: { argv: ['cat', 'sdk/hello.txt'] } });
    expect(run.structuredContent).toMatchObject({ exitCode: 0, stdout: 'hello over HTTP ☃\n' });
  } finally {
    await client.close();
  }
  // What the SDK sent and got: POSTs answered 200 (202 for the notification), its SSE GET
  // answered 405, its Accept header and, after initialize, the protocol version header.
  expect(seen.filter((s) => s.method === 'GET').map((s) => s.status)).toEqual([405]);
  const posts = seen.filter((s) => s.method === 'POST');
  expect(posts[0]).toMatchObject({ status: 200, accept: 'application/json, text/event-stream', protocolVersion: null });
  expect(posts[1]).toMatchObject({ status: 202 });
  expect(posts.slice(2).every((s) => s.status === 200 && s.protocolVersion !== null)).toBe(true);
});

test('a denied permission surfaces as an McpError with -32003; the listing hides the tool', async () => {
  const { client, transport } = connect(gw.token({ id: 'reader', permissions: ['file:read'] }));
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['read_file', 'read_multiple_files', 'search_text']);
    const err = await client.callTool({ name: 'write_file', arguments: { path: 'x', content: 'y' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(-32003);
    expect((err as McpError).message).toContain('file:write');
  } finally {
    await client.close();
  }
});

test('no token: connect fails, and the error the SDK raises carries our JSON-RPC body (-32008, which check failed)', async () => {
  const { client, transport, seen } = connect(undefined);
  await expect(client.connect(transport)).rejects.toThrow(/-32008.*Unauthenticated: no token was presented/);
  expect(seen.map((s) => s.status)).toEqual([401]);
  await client.close();
});
