/**
 * The package as npm would ship it (`npm pack`): the compiled runtime and the README, nothing
 * else; every package its code requires is a production dependency; and the unpacked copy runs
 * `toolgate` and `generate-token` (help, a token, a stdio session). `engines` covers the Node
 * running these tests. Packs the current dist/ (build first), without running `prepare`.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';

const REPO = path.resolve(__dirname, '../..');
const pkg = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as {
  bin: Record<string, string>;
  engines: { node: string };
  dependencies: Record<string, string>;
};
const RUNTIME = /^dist\/(bin|shared|gateway|executor|shim)\/.+\.js$/;

let tmp: string;
let unpacked: string;
let files: string[];

beforeAll(async () => {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-pack-'));
  const out = execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], {
    cwd: REPO,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const [packed] = JSON.parse(out) as Array<{ filename: string; files: Array<{ path: string }> }>;
  files = packed!.files.map((f) => f.path).sort();
  execFileSync('tar', ['xzf', path.join(tmp, packed!.filename), '-C', tmp]);
  unpacked = path.join(tmp, 'package');
  // The installed dependencies stand in for what `npm install toolgate` would fetch.
  await fs.symlink(path.join(REPO, 'node_modules'), path.join(unpacked, 'node_modules'));
}, 60_000);

afterAll(async () => {
  await fs.rm(tmp, { recursive: true, force: true });
});

test('holds the compiled runtime, package.json and the README, and nothing else', () => {
  const others = files.filter((f) => !RUNTIME.test(f) && f !== 'package.json' && f !== 'README.md');
  expect(others).toEqual([]);
  for (const bin of Object.values(pkg.bin)) expect(files).toContain(bin.replace(/^\.\//, ''));
  expect(files).toContain('dist/executor/agent/main.js'); // the sandbox agent bwrap and none spawn
});

test('every package the shipped code requires is a production dependency', async () => {
  const required = new Set<string>();
  for (const file of files.filter((f) => f.endsWith('.js'))) {
    const code = await fs.readFile(path.join(unpacked, file), 'utf8');
    for (const m of code.matchAll(/require\("([^".][^"]*)"\)/g)) {
      const spec = m[1]!;
      if (spec.startsWith('node:') || builtinModules.includes(spec)) continue;
      required.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
    }
  }
  expect(required.size).toBeGreaterThan(5);
  expect([...required].filter((name) => !(name in pkg.dependencies))).toEqual([]);
});

test('engines names the Node these tests run on (a caret range: the tested major line)', () => {
  const range = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(pkg.engines.node);
  expect(range).not.toBeNull();
  const [major, minor, patch] = process.versions.node.split('.').map(Number) as [number, number, number];
  const [, wantMajor, wantMinor, wantPatch] = range!.map(Number) as [number, number, number, number];
  expect(major).toBe(wantMajor);
  expect(minor * 1e6 + patch).toBeGreaterThanOrEqual(wantMinor * 1e6 + wantPatch);
});

describe('the unpacked package runs', () => {
  const run = (bin: string, args: string[]) =>
    promisify(execFile)(process.execPath, [path.join(unpacked, pkg.bin[bin]!), ...args], { cwd: tmp, env: { PATH: process.env.PATH ?? '' } });

  test('toolgate --help and generate-token --help', async () => {
    expect((await run('toolgate', ['--help'])).stdout).toMatch(/Usage: toolgate <command>/);
    expect((await run('generate-token', ['--help'])).stdout).toMatch(/Usage: generate-token/);
  });

  test('generate-token and toolgate token issue tokens', async () => {
    const secret = ['--secret', 'pack-test-secret-0123456789-0123456789'];
    expect((await run('generate-token', ['--id', 'a', ...secret])).stdout).toMatch(/^eyJ/);
    expect((await run('toolgate', ['token', '--id', 'a', ...secret])).stdout).toMatch(/^eyJ/);
  });

  test('toolgate stdio answers tools/list', async () => {
    const child = spawn(process.execPath, [path.join(unpacked, pkg.bin.toolgate!), 'stdio', '--root', tmp], {
      env: { PATH: process.env.PATH ?? '', TOOLGATE_LOG_LEVEL: 'warn' },
    });
    let stdout = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stdin.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }) + '\n');
    const code = await new Promise((resolve) => child.once('close', resolve));
    expect(code).toBe(0);
    expect(JSON.parse(stdout.split('\n')[0]!).result.tools.length).toBeGreaterThan(10);
  });
});
