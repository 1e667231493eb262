/**
 * The official MCP SDK client drives the real `toolgate stdio` binary: connect (initialize +
 * notifications/initialized), list tools, write, read, list. The SDK checks every tool listing
 * against its own schema and every structuredContent against the tool's outputSchema (callTool
 * throws on a mismatch); a counting wrapper around its default validator shows those checks ran.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import type { JsonSchemaType, JsonSchemaValidator, jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { BIN } from '../stdio/server';

/** The SDK's default validator, counting what it accepted and refused. */
class CountingValidator implements jsonSchemaValidator {
  private readonly inner = new AjvJsonSchemaValidator();
  readonly outcomes: Array<{ valid: boolean; error?: string }> = [];
  getValidator<T>(schema: JsonSchemaType): JsonSchemaValidator<T> {
    const validate = this.inner.getValidator<T>(schema);
    return (input) => {
      const result = validate(input);
      this.outcomes.push(result.valid ? { valid: true } : { valid: false, error: result.errorMessage });
      return result;
    };
  }
}

let root: string;
let client: Client;
let transport: StdioClientTransport;
let validator: CountingValidator;
let stderr = '';

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-sdk-'));
  validator = new CountingValidator();
  transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'stdio', '--root', root],
    env: { ...getDefaultEnvironment(), TOOLGATE_LOG_LEVEL: 'warn', TOOLGATE_DATA_DIR: path.join(root, '.toolgate') },
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  client = new Client({ name: 'toolgate-e2e', version: '1.0.0' }, { jsonSchemaValidator: validator });
  await client.connect(transport);
});

afterAll(async () => {
  await client?.close();
  await fs.rm(root, { recursive: true, force: true });
});

const text = (result: object) => ((result as { content: unknown }).content as Array<{ type: string; text?: string }>).map((c) => c.text ?? '').join('\n');

test('connect negotiates with toolgate', () => {
  expect(client.getServerVersion()).toMatchObject({ name: 'toolgate', version: expect.any(String) });
  expect(client.getServerCapabilities()).toMatchObject({ tools: {} });
});

test('list, write, read, list: structuredContent passes the SDK outputSchema checks', async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  expect(names).toEqual(expect.arrayContaining(['read_file', 'write_file', 'list_directory']));
  for (const t of tools) {
    expect(t.name).toMatch(/^[a-z0-9_]{1,64}$/);
    expect(t.inputSchema.type).toBe('object');
    expect(t.annotations).toBeDefined();
  }
  for (const name of ['read_file', 'write_file', 'list_directory']) expect(tools.find((t) => t.name === name)?.outputSchema).toBeDefined();

  const write = await client.callTool({ name: 'write_file', arguments: { path: 'notes/hello.txt', content: 'hello from the SDK ☃\n' } });
  expect(write.isError).toBeFalsy();
  expect(write.structuredContent).toMatchObject({ path: 'notes/hello.txt', bytesWritten: Buffer.byteLength('hello from the SDK ☃\n') });
  expect(await fs.readFile(path.join(root, 'notes/hello.txt'), 'utf8')).toBe('hello from the SDK ☃\n');

  const read = await client.callTool({ name: 'read_file', arguments: { path: 'notes/hello.txt' } });
  expect(read.isError).toBeFalsy();
  expect(read.structuredContent).toMatchObject({ path: 'notes/hello.txt', content: 'hello from the SDK ☃\n', truncated: false });
  expect(text(read)).toBe('hello from the SDK ☃\n');

  const list = await client.callTool({ name: 'list_directory', arguments: { path: 'notes' } });
  expect(list.isError).toBeFalsy();
  expect(list.structuredContent).toMatchObject({ entries: [{ name: 'hello.txt', type: 'file' }], truncated: false });
  const rootList = await client.callTool({ name: 'list_directory', arguments: {} });
  expect(rootList.structuredContent).toMatchObject({ path: '.', entries: expect.arrayContaining([{ name: 'notes', type: 'directory' }]) });

  // Each of the four structured results went through the SDK's validator, and every check passed.
  expect(validator.outcomes.length).toBeGreaterThanOrEqual(4);
  expect(validator.outcomes.filter((o) => !o.valid)).toEqual([]);
});

test('a tool failure is a result the model can read; a bad argument names the field', async () => {
  const missing = await client.callTool({ name: 'read_file', arguments: { path: 'nope.txt' } });
  expect(missing.isError).toBe(true);
  expect(text(missing)).toContain('nope.txt');

  const bad = await client.callTool({ name: 'write_file', arguments: { path: 'x.txt' } });
  expect(bad.isError).toBe(true);
  expect(text(bad)).toMatch(/\bcontent\b/);
});

test('an unknown tool is a JSON-RPC error (-32602), and the connection keeps working', async () => {
  await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
  await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toBeInstanceOf(McpError);
  await expect(client.ping()).resolves.toEqual({});
  expect(stderr).not.toMatch(/"level":(50|60)/); // no error or fatal logs
});
