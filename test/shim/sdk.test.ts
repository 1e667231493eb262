/**
 * The official MCP SDK client spawns `toolgate shim` over stdio, as an agent would, against a
 * test gateway that speaks a minimal MCP: connect, list, call. When the gateway goes down a call
 * fails at once with the shim's -32006 instead of hanging, and works again once it is back.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { ServerResponse } from 'node:http';
import { ErrorCode } from '../../shared/protocol/errors';
import { jsonRpcReplies, RequestMessage, Seen, sendJson, TestGateway } from './gateway';
import { API_KEY, BIN, TOKEN } from './shim-process';

const ECHO_TOOL = { name: 'echo', description: 'Returns its text', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } };

function mcp(m: RequestMessage): unknown {
  const params = (m.params ?? {}) as Record<string, unknown>;
  switch (m.method) {
    case 'initialize':
      return { protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'test-gateway', version: '0.0.1' } };
    case 'tools/list':
      return { tools: [ECHO_TOOL] };
    case 'tools/call':
      return { content: [{ type: 'text', text: String((params.arguments as { text?: unknown } | undefined)?.text) }] };
    default:
      return {};
  }
}

function mcpGateway(seen: Seen, res: ServerResponse): void {
  const reply = jsonRpcReplies(seen.body, mcp);
  if (reply === undefined) {
    res.writeHead(202);
    res.end();
  } else sendJson(res, 200, reply);
}

let gateway: TestGateway;
let client: Client;
let stderr = '';

beforeAll(async () => {
  gateway = await TestGateway.start();
  gateway.handler = mcpGateway;
  const env: Record<string, string> = { ...getDefaultEnvironment(), TOOLGATE_TOKEN: TOKEN, TOOLGATE_API_KEY: API_KEY, TOOLGATE_LOG_LEVEL: 'debug' };
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, 'shim', '--url', gateway.url], env, stderr: 'pipe' });
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  client = new Client({ name: 'toolgate-shim-e2e', version: '1.0.0' });
  await client.connect(transport);
});

afterAll(async () => {
  await client?.close();
  await gateway?.stop().catch(() => undefined);
});

test('connect, list and call through the shim', async () => {
  expect(client.getServerVersion()).toEqual({ name: 'test-gateway', version: '0.0.1' });
  const { tools } = await client.listTools();
  expect(tools.map((t) => t.name)).toEqual(['echo']);
  const result = await client.callTool({ name: 'echo', arguments: { text: 'hello ☃' } });
  expect(result.content).toEqual([{ type: 'text', text: 'hello ☃' }]);
  const methods = gateway.seen.map((s) => (JSON.parse(s.body) as { method: string }).method);
  expect(methods).toEqual(expect.arrayContaining(['initialize', 'notifications/initialized', 'tools/list', 'tools/call']));
  expect(gateway.seen.every((s) => s.headers.authorization === `Bearer ${TOKEN}` && s.headers['x-api-key'] === API_KEY)).toBe(true);
});

test('gateway down: the call fails with -32006 instead of hanging; back up: it works again', async () => {
  const port = gateway.port;
  await gateway.stop();
  const failure = await client.callTool({ name: 'echo', arguments: { text: 'x' } }).catch((err: unknown) => err);
  expect(failure).toBeInstanceOf(McpError);
  expect(failure).toMatchObject({ code: ErrorCode.Unavailable });
  expect((failure as McpError).message).toContain(`gateway unreachable at ${gateway.url}`);

  gateway = await TestGateway.start({ port });
  gateway.handler = mcpGateway;
  expect((await client.callTool({ name: 'echo', arguments: { text: 'again' } })).content).toEqual([{ type: 'text', text: 'again' }]);
  expect(stderr).not.toContain(TOKEN);
  expect(stderr).not.toContain(API_KEY);
});
