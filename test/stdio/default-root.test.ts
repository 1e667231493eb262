/**
 * `toolgate stdio` without --root serves the current directory, but refuses to default to `/` or
 * to the home directory itself; naming either with --root serves it. The built binary runs as a
 * real process (HOME points at a temp directory standing in for a home).
 */
import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BIN } from './server';

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }) + '\n';

/** Starts `toolgate stdio ARGS` in `cwd`, sends one tools/list and closes stdin. */
function stdio(args: string[], cwd: string, home: string): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'stdio', ...args], { cwd, env: { PATH: process.env.PATH ?? '', HOME: home, TOOLGATE_LOG_LEVEL: 'warn' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.stdin.on('error', () => undefined);
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(INIT);
  });
}

let home: string;
let project: string;
beforeAll(async () => {
  home = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-home-'));
  project = path.join(home, 'project');
  await fs.mkdir(project);
});
afterAll(async () => {
  await fs.rm(home, { recursive: true, force: true });
});

const served = (o: Outcome) => o.code === 0 && /"tools":\[/.test(o.stdout);

test.each([
  ['/', () => '/', /current directory is the root directory \/[\s\S]*--root \//],
  ['the home directory', () => home, /current directory is the home directory [\s\S]*--root /],
])('started in %s with no --root: refused with a usage error naming --root', async (_name, cwd, message) => {
  const o = await stdio([], cwd(), home);
  expect(o.code).toBe(2);
  expect(o.stdout).toBe('');
  expect(o.stderr).toMatch(message);
});

test('a home reached through a symlink is still the home directory', async () => {
  const link = path.join(os.tmpdir(), `tg-home-link-${process.pid}`);
  await fs.symlink(home, link);
  try {
    expect((await stdio([], home, link)).code).toBe(2);
  } finally {
    await fs.unlink(link);
  }
});

test('a project directory with no --root is served (the default stays the current directory)', async () => {
  expect(served(await stdio([], project, home))).toBe(true);
});

test.each([
  ['/', () => ['--root', '/'], () => project],
  ['the home directory', () => ['--root', home], () => '/'],
  ['the home directory as "."', () => ['--root', '.'], () => home],
])('--root naming %s serves it', async (_name, args, cwd) => {
  expect(served(await stdio(args(), cwd(), home))).toBe(true);
});
