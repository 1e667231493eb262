/**
 * The official MCP SDK client drives every tool at least once over the real `toolgate stdio`
 * binary, on each sandbox backend this machine has. The SDK validates each structuredContent
 * against the tool's outputSchema, so a result that breaks its own schema fails here too.
 */
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ALL_TOOLS } from '../../shared/tools/index';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { BIN } from '../stdio/server';

type Result = { content: Array<{ type: string; text?: string }>; structuredContent?: Record<string, unknown>; isError?: boolean };
const text = (r: Result) => r.content.map((c) => c.text ?? '').join('\n');

function everyToolSuite(backend: 'none' | 'bwrap'): void {
  let root: string;
  let client: Client;
  let server: http.Server;
  let port: number;
  const called = new Set<string>();
  const call = async (name: string, args: Record<string, unknown>): Promise<Result> => {
    called.add(name);
    return (await client.callTool({ name, arguments: args })) as Result;
  };

  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), `toolgate-every-${backend}-`));
    if (backend === 'bwrap') await fs.chown(root, 65534, 65534);
    server = http.createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ method: req.method, url: req.url }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as { port: number }).port;
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'stdio', '--root', root, '--sandbox', backend],
      env: {
        ...getDefaultEnvironment(),
        TOOLGATE_LOG_LEVEL: 'warn',
        TOOLGATE_DATA_DIR: path.join(os.tmpdir(), 'toolgate-every-data'),
        TOOLGATE_HTTP_ALLOW: `127.0.0.1:${port}`,
      },
      stderr: 'ignore',
    });
    client = new Client({ name: 'every-tool', version: '1.0.0' });
    await client.connect(transport);
  });

  afterAll(async () => {
    await client?.close();
    server?.close();
    await fs.rm(root, { recursive: true, force: true });
  });

  it('lists every tool', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(ALL_TOOLS.map((t) => t.name).sort());
  });

  it('drives the file tools', async () => {
    expect((await call('create_directory', { path: 'src' })).isError).toBeFalsy();
    expect((await call('write_file', { path: 'src/a.txt', content: 'one\ntwo\nthree\n' })).isError).toBeFalsy();
    expect(text(await call('read_file', { path: 'src/a.txt' }))).toBe('one\ntwo\nthree\n');
    const edit = await call('edit_file', { path: 'src/a.txt', edits: [{ oldText: 'two', newText: 'TWO' }] });
    expect(text(edit)).toMatch(/-two[\s\S]*\+TWO/);
    const many = await call('read_multiple_files', { paths: ['src/a.txt', 'src/missing.txt'] });
    expect(text(many)).toMatch(/TWO/);
    expect(text(many)).toMatch(/missing/);
    expect(text(await call('list_directory', { path: 'src' }))).toMatch(/a\.txt/);
    expect(text(await call('directory_tree', { path: '.' }))).toMatch(/a\.txt/);
    expect(text(await call('search_files', { path: '.', pattern: '**/*.txt' }))).toMatch(/a\.txt/);
    expect(text(await call('search_text', { path: '.', query: 'TWO' }))).toMatch(/a\.txt/);
    expect((await call('get_file_info', { path: 'src/a.txt' })).structuredContent).toMatchObject({ size: 14 });
    expect((await call('move_path', { source: 'src/a.txt', destination: 'src/b.txt' })).isError).toBeFalsy();
    expect((await call('delete_path', { path: 'src/b.txt' })).isError).toBeFalsy();
    await expect(fs.stat(path.join(root, 'src/b.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('drives the command tools', async () => {
    const run = await call('run_command', { argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'] });
    expect(run.structuredContent).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n' });
    const started = await call('start_process', { command: 'cat' });
    const handle = String(started.structuredContent?.handle);
    expect(text(await call('list_processes', {}))).toContain(handle);
    await call('write_process_input', { handle, input: 'ping\n' });
    const out = await call('read_process_output', { handle, offset: 0, wait_ms: 2000 });
    expect(String(out.structuredContent?.data)).toContain('ping');
    expect((await call('kill_process', { handle })).isError).toBeFalsy();
  });

  it('drives http_request against an allow-listed loopback server', async () => {
    const r = await call('http_request', { url: `http://127.0.0.1:${port}/hello`, method: 'POST', body: 'x' });
    expect(r.structuredContent).toMatchObject({ status: 200 });
    expect(String(r.structuredContent?.body)).toContain('/hello');
  });

  it('called every tool', () => {
    expect([...called].sort()).toEqual(ALL_TOOLS.map((t) => t.name).sort());
  });
}

describe('SDK client drives every tool over toolgate stdio (none)', () => everyToolSuite('none'));
describeIf(hasCommand('bwrap') && isRoot, 'needs bubblewrap and root', 'SDK client drives every tool over toolgate stdio (bwrap)', () =>
  everyToolSuite('bwrap'),
);
