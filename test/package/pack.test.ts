/**
 * The package as npm would ship it (`npm pack`): the compiled runtime, toolgate's launcher
 * (bin/toolgate) and the README, nothing else; every package its code requires is a production dependency; and the unpacked copy runs
 * `toolgate` and `generate-token` (help, a token, a stdio session); installed globally from the
 * tarball, `toolgate serve`, `toolgate stdio` and `generate-token` run by name from any directory,
 * and `toolgate serve` so started runs with serve's node flags (its memory target), `stdio` without.
 * `engines` covers the Node LTS lines and the Node running these tests. Packs the current dist/
 * (build first), without running `prepare`.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { SERVE_NODE_FLAGS } from '../../bin/node-flags';
import { freePort } from '../helpers/ports';

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

test("holds the compiled runtime, toolgate's bin, package.json and the README, and nothing else", () => {
  const others = files.filter((f) => !RUNTIME.test(f) && !['package.json', 'README.md', 'bin/toolgate'].includes(f));
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

/** `^20.19.0 || ^22.12.0 || ^24` → one caret range per supported major line, with its minimum. */
function caretRanges(range: string): Map<number, [number, number]> {
  const lines = new Map<number, [number, number]>();
  for (const part of range.split('||').map((p) => p.trim())) {
    const m = /^\^(\d+)(?:\.(\d+)\.(\d+))?$/.exec(part);
    if (!m) throw new Error(`engines.node part "${part}" is not a caret range`);
    lines.set(Number(m[1]), [Number(m[2] ?? 0), Number(m[3] ?? 0)]);
  }
  return lines;
}

test('engines names the current Node LTS lines (20, 22, 24), and the Node these tests run on', () => {
  const lines = caretRanges(pkg.engines.node);
  expect([...lines.keys()]).toEqual([20, 22, 24]);
  // jose 6 (the OAuth endpoint's JOSE library) is ES modules only: require() of ES modules needs
  // 20.19 and 22.12, the real minimums of those lines (undici 7 needs 20.18.1, below it).
  expect(lines.get(20)).toEqual([19, 0]);
  expect(lines.get(22)).toEqual([12, 0]);
  const [major, minor, patch] = process.versions.node.split('.').map(Number) as [number, number, number];
  const [wantMinor, wantPatch] = lines.get(major) ?? [Infinity, 0];
  expect(minor * 1e6 + patch).toBeGreaterThanOrEqual(wantMinor * 1e6 + wantPatch);
});

test("is publishable: not private; toolgate's bin is the launcher that starts serve with its node flags, generate-token's a node script", async () => {
  expect((pkg as { private?: boolean }).private).toBeUndefined();
  expect(pkg.bin).toEqual({ toolgate: 'bin/toolgate', 'generate-token': 'dist/bin/generate-token.js' });
  const head = async (bin: string) => (await fs.readFile(path.join(unpacked, pkg.bin[bin]!), 'utf8')).split('\n').slice(0, 2);
  expect((await head('toolgate'))[0]).toBe('#!/bin/sh'); // test/bin/launch.test.ts: what its second line runs
  expect((await head('generate-token'))[0]).toBe('#!/usr/bin/env node');
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

/**
 * What a user gets from `npm install -g toolgate` (or `npx toolgate`): the tarball installed into
 * a private prefix from npm's cache (`--offline`: the dependencies are the ones this checkout's
 * `npm install` already fetched), and the three commands run by name from an unrelated directory.
 */
describe('installed globally from the tarball', () => {
  let prefix: string;
  let elsewhere: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    prefix = path.join(tmp, 'prefix');
    elsewhere = await fs.mkdtemp(path.join(tmp, 'elsewhere-'));
    const tarball = (await fs.readdir(tmp)).find((f) => f.endsWith('.tgz'))!;
    await promisify(execFile)('npm', ['install', '--global', '--prefix', prefix, '--offline', '--no-audit', '--no-fund', path.join(tmp, tarball)], {
      cwd: tmp,
      env: { ...process.env, npm_config_loglevel: 'error' },
    });
    env = { PATH: `${path.join(prefix, 'bin')}:${process.env.PATH ?? ''}`, HOME: elsewhere, TOOLGATE_LOG_LEVEL: 'warn' };
  }, 120_000);

  const sh = (command: string, extra: Record<string, string> = {}) => promisify(execFile)('sh', ['-c', command], { cwd: elsewhere, env: { ...env, ...extra } });

  test('generate-token and toolgate token run by name', async () => {
    const secret = 'global-test-secret-0123456789-0123456789';
    expect((await sh(`generate-token --id a --secret ${secret}`)).stdout).toMatch(/^eyJ/);
    expect((await sh(`toolgate token --id a --secret ${secret}`)).stdout).toMatch(/^eyJ/);
  });

  test("toolgate stdio answers tools/list and runs a command, without serve's node flags", async () => {
    const calls = [
      { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_command', arguments: { command: 'echo from-global' } } },
    ];
    const child = spawn('toolgate', ['stdio', '--root', elsewhere], { cwd: elsewhere, env });
    const closed = new Promise((resolve) => child.once('close', resolve));
    let stdout = '';
    const answered = new Promise<void>((resolve) =>
      child.stdout.on('data', (b: Buffer) => {
        stdout += b.toString();
        if (stdout.split('\n').length > calls.length) resolve();
      }),
    );
    child.stdin.write(calls.map((c) => JSON.stringify(c) + '\n').join(''));
    await answered;
    // The launcher gives serve alone its flags: stdio keeps V8's defaults (its latency and start-up).
    expect(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean)).toEqual([
      'node',
      path.join(prefix, 'bin', 'toolgate'),
      'stdio',
      '--root',
      elsewhere,
    ]);
    child.stdin.end();
    expect(await closed).toBe(0);
    const [list, run] = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(list.result.tools.length).toBeGreaterThan(10);
    expect(JSON.stringify(run.result)).toContain('from-global');
  }, 30_000);

  test("toolgate serve --port runs with serve's node flags and serves a token from the command its banner prints", async () => {
    const port = String(await freePort());
    const args = ['serve', '--port', port, '--sandbox', 'none', '--data-dir', path.join(elsewhere, 'data')];
    const child = spawn('toolgate', args, { cwd: elsewhere, env });
    try {
      let stderr = '';
      await new Promise<void>((resolve, reject) => {
        child.stderr.on('data', (b: Buffer) => {
          stderr += b.toString();
          if (/\ntoolgate serve: then: /.test(stderr)) resolve();
        });
        child.once('exit', (code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
      });
      // The pid the shell started is node itself (the launcher's sh replaced itself), with the flags: no
      // wrapper process stays resident, and the memory target holds (bench/gateway-memory.ts, `bin`).
      const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
      expect(argv).toEqual(['node', ...SERVE_NODE_FLAGS, path.join(prefix, 'bin', 'toolgate'), ...args]);
      const printed = /get a token: +(.+)$/m.exec(stderr)?.[1] ?? '';
      const token = (await sh(printed)).stdout.split('\n')[0]!;
      const res = await fetch(`http://127.0.0.1:${port}/`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'run_command', arguments: { command: 'echo served' } } }),
      });
      expect(res.status).toBe(200);
      expect(JSON.stringify(await res.json())).toContain('served');
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
    }
  }, 30_000);
});
