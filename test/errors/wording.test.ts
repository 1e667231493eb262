/**
 * Errors a model or a person must act on say what to do, through the real `toolgate stdio`
 * (dist/): an unknown tool names the closest tools; an unknown argument key is named with the
 * key it most likely meant; a parse error gives its line and column; a run_command timeout above
 * the maximum says it was capped. A token with a bad signature names the likely cause.
 */
import { signToken, verifyToken } from '../../shared/auth/token';
import { TokenInvalidSignature } from '../../shared/auth/token-errors';
import { call, nextResponse } from '../protocol/wire';
import { StdioServer } from '../stdio/server';

let server: StdioServer;
beforeAll(async () => {
  server = await StdioServer.start({ env: { TOOLGATE_MAX_COMMAND_TIMEOUT_MS: '5000' } });
}, 30_000);
afterAll(async () => {
  await server?.close();
});

type ToolReply = { content: Array<{ text: string }>; structuredContent?: Record<string, unknown>; isError?: boolean };
/** Replies may be slow on a loaded machine: a generous deadline, never a fixed wait. */
const REPLY_MS = 20_000;
const callTool = async (name: string, args: Record<string, unknown>) => call(server, 'tools/call', { name, arguments: args }, REPLY_MS);
const toolText = (r: { result?: unknown }) => (r.result as ToolReply).content.map((c) => c.text).join('\n');

describe('unknown tool', () => {
  test.each([
    ['reed_file', /Did you mean read_file\?/],
    ['writefile', /Did you mean write_file\b/],
    ['list_dir', /list_directory/],
    ['run_comand', /Did you mean run_command\?/],
  ])('%s: -32602 naming the closest tools', async (name, close) => {
    const r = await callTool(name, {});
    expect(r.error?.code).toBe(-32602);
    expect(r.error?.message).toMatch(new RegExp(`^Unknown tool: ${name}\\.`));
    expect(r.error?.message).toMatch(close);
    expect(r.error?.message).toContain('tools/list');
  });

  test('a name close to nothing gets no guess', async () => {
    const r = await callTool('zzzzqqqq', {});
    expect(r.error?.message).not.toMatch(/Did you mean/);
  });

  test('only tools the caller may use are suggested', async () => {
    const reader = await StdioServer.start({ permissions: ['file:read'] });
    try {
      const r = await call(reader, 'tools/call', { name: 'write_fil', arguments: {} }, REPLY_MS);
      expect(r.error?.message).not.toContain('write_file');
      const near = await call(reader, 'tools/call', { name: 'read_fil', arguments: {} }, REPLY_MS);
      expect(near.error?.message).toMatch(/Did you mean read_file/);
    } finally {
      await reader.close();
    }
  });
});

describe('unknown argument keys', () => {
  test('a typo is named with the key it most likely meant, next to the missing one', async () => {
    const r = await callTool('write_file', { path: 'a.txt', contents: 'hello' });
    expect((r.result as ToolReply).isError).toBe(true);
    const text = toolText(r);
    expect(text).toMatch(/`contents` is not a known argument of write_file\. Did you mean `content`\?/);
    expect(text).toMatch(/content: /); // the missing key is still reported
    expect(text).toMatch(/^Invalid arguments for write_file: `contents`/);
    expect(text).toMatch(/\(write_file takes: path, content, encoding, mode\)$/);
  });

  test('an unknown optional key is refused even when everything required is there', async () => {
    const r = await callTool('read_file', { path: 'a.txt', encodin: 'utf8' });
    expect((r.result as ToolReply).isError).toBe(true);
    expect(toolText(r)).toMatch(/`encodin` is not a known argument of read_file\. Did you mean `encoding`\?/);
  });

  test('known keys still work', async () => {
    const w = await callTool('write_file', { path: 'b.txt', content: 'fine' });
    expect((w.result as ToolReply).isError).toBeFalsy();
  });
});

describe('parse errors give the position', () => {
  test.each([
    ['{"jsonrpc":"2.0","id":1,"method":"ping",}', /line 1, column 41: expected a property name in double quotes/],
    ['{"jsonrpc":"2.0","id":1,"method":ping}', /line 1, column 34: unexpected character "p" where a value should start/],
    ['{"jsonrpc":"2.0","id":1 "method":"ping"}', /line 1, column 25: expected ',' or '}'/],
    ['{"jsonrpc":"2.0","id":1,"method":"ping"', /line 1, column 40: the input ends before the JSON value is complete/],
  ])('%s', async (frame, where) => {
    await server.send(frame);
    const r = await nextResponse(server, REPLY_MS);
    expect(r.error?.code).toBe(-32700);
    expect(r.error?.message).toMatch(/^Parse error: the message is not valid JSON \(/);
    expect(r.error?.message).toMatch(where);
  });
});

test('run_command: a timeout_ms above the maximum is capped, and the result says so', async () => {
  const over = await callTool('run_command', { command: 'true', timeout_ms: 900_000 });
  expect(toolText(over)).toMatch(/^timeout_ms 900000 is above the server's maximum; capped to 5000 ms \(TOOLGATE_MAX_COMMAND_TIMEOUT_MS\)/);
  expect((over.result as ToolReply).structuredContent).toMatchObject({ exitCode: 0, timeoutMs: 5000, timeoutCapped: true });
  const within = await callTool('run_command', { command: 'true', timeout_ms: 4000 });
  expect(toolText(within)).not.toMatch(/capped/);
  expect((within.result as ToolReply).structuredContent).toMatchObject({ timeoutMs: 4000 });
  expect((within.result as ToolReply).structuredContent?.timeoutCapped).toBeUndefined();
});

test('a token signed with another secret: the refusal names the likely cause', () => {
  const now = Math.floor(Date.now() / 1000);
  const token = signToken({ id: 'a', permissions: ['file:read'], iat: now, exp: now + 60 }, 'the-other-secret-0123456789-0123456789');
  let err: unknown;
  try {
    verifyToken(token, 'the-server-secret-0123456789-012345678', {});
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(TokenInvalidSignature);
  expect((err as Error).message).toMatch(/another secret/);
  expect((err as Error).message).toMatch(/TOOLGATE_DATA_DIR/);
  expect((err as Error).message).toMatch(/TOOLGATE_JWT_SECRET/);
});
