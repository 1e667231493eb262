/**
 * The README's stdio snippet, as written, on a checkout that was only installed: the sources are
 * copied to a fresh directory without dist/, npm's `prepare` step (what `npm install` runs in a
 * clone) builds it, and the snippet's command — its placeholder paths replaced by that directory
 * and a project folder — serves the official SDK client.
 */
import { execFile } from 'node:child_process';
import { existsSync, promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const REPO = path.resolve(__dirname, '../..');
const README = readFileSync(path.join(REPO, 'README.md'), 'utf8');

interface ServerEntry {
  command: string;
  args: string[];
}

/** The first ```json block of the README whose server runs `toolgate … stdio`. */
function stdioSnippet(): ServerEntry {
  for (const m of README.matchAll(/```json\n([\s\S]*?)```/g)) {
    const entry = (JSON.parse(m[1]!) as { mcpServers: Record<string, ServerEntry> }).mcpServers.toolgate;
    if (entry?.args.includes('stdio')) return entry;
  }
  throw new Error('README.md has no stdio snippet');
}

let checkout: string;
let project: string;

beforeAll(async () => {
  checkout = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-clone-'));
  for (const entry of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'shared', 'gateway', 'executor', 'shim', 'bin', 'scripts']) {
    await fs.cp(path.join(REPO, entry), path.join(checkout, entry), { recursive: true });
  }
  await fs.symlink(path.join(REPO, 'node_modules'), path.join(checkout, 'node_modules'));
  project = path.join(checkout, 'project');
  await fs.mkdir(project);
  await fs.writeFile(path.join(project, 'hello.txt'), 'hello from the project\n');
  expect(existsSync(path.join(checkout, 'dist'))).toBe(false);
  // What `npm install` runs in a clone once the dependencies are in place.
  await promisify(execFile)('npm', ['run', '--silent', 'prepare'], { cwd: checkout });
}, 180_000);

afterAll(async () => {
  await fs.rm(checkout, { recursive: true, force: true });
});

test('the snippet uses the placeholders this test fills in', () => {
  const { command, args } = stdioSnippet();
  expect(command).toBe('node');
  expect(args).toEqual(['/path/to/toolgate/dist/bin/toolgate.js', 'stdio', '--root', '/path/to/project']);
});

test('after install, the snippet as written serves the SDK client', async () => {
  const { command, args } = stdioSnippet();
  const filled = args.map((a) => a.replace('/path/to/toolgate', checkout).replace('/path/to/project', project));
  const transport = new StdioClientTransport({
    command: command === 'node' ? process.execPath : command,
    args: filled,
    env: { ...getDefaultEnvironment(), TOOLGATE_LOG_LEVEL: 'warn' },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'readme-snippet', version: '1.0.0' });
  await client.connect(transport);
  try {
    const result = (await client.callTool({ name: 'read_file', arguments: { path: 'hello.txt' } })) as { content: Array<{ text?: string }> };
    expect(result.content[0]?.text).toContain('hello from the project');
  } finally {
    await client.close();
  }
}, 30_000);
