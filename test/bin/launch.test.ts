/**
 * `toolgate serve` is launched with the V8 heap flags of bin/node-flags.ts wherever it is
 * launched: the package's `toolgate` bin (bin/toolgate: a global install, npx) starts node with
 * them for serve and without them for every other command (test/package/pack.test.ts checks a
 * global install's), and the service image's CMD, the gateway service of docker-compose.yml and
 * `npm start` spell them out (docs/deployment.md, "Memory"); `serve` started that way runs with
 * them. The executor keeps V8's defaults (it has CPU targets and no memory one). Launched by node
 * without them (`node dist/bin/toolgate.js serve`), serve restarts itself with them in place where
 * Node can (process.execve: Node ≥ 22.15): the same pid, signals and exit code as before.
 * TOOLGATE_TEST_NODE names another node binary to check this with as well (e.g. Node 24's).
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { promises as fs, readFileSync, statSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { missingServeFlags, SERVE_NODE_FLAGS } from '../../bin/node-flags';
import { freePort } from '../helpers/ports';

const REPO = path.resolve(__dirname, '../..');
const BIN = path.join(REPO, 'dist/bin/toolgate.js');
const LAUNCHER = path.join(REPO, 'bin/toolgate');
const read = (file: string) => readFileSync(path.join(REPO, file), 'utf8');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('the list is the young generation at 2 × 4 MiB and a major GC at 20 % old-generation growth', () => {
  expect(SERVE_NODE_FLAGS).toEqual(['--max-semi-space-size=4', '--heap-growing-percent=20']);
});

test("the package's toolgate bin (bin/toolgate) starts serve with exactly those flags, every other command without", () => {
  const launcher = read('bin/toolgate').split('\n');
  expect(launcher[0]).toBe('#!/bin/sh');
  const flags = SERVE_NODE_FLAGS.join(' ');
  expect(launcher[1]).toBe(`':' //; case "$1" in serve) exec node ${flags} "$0" "$@";; esac; exec node "$0" "$@"`);
  expect(statSync(LAUNCHER).mode & 0o111).toBe(0o111);
});

/** The command line of `bin/toolgate ARGS` once `up` says it is up, as /proc shows it (the pid the launcher started). */
async function launched(args: string[], env: NodeJS.ProcessEnv, up: (child: ChildProcess) => Promise<boolean>): Promise<string[]> {
  const child = spawn(LAUNCHER, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    while (!(await up(child))) {
      if (child.exitCode !== null) throw new Error(`${args[0]} exited: ${err}`);
      await sleep(50);
    }
    return readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } finally {
    child.stdin!.end();
    child.kill('SIGTERM');
    await exited;
  }
}

test('bin/toolgate serve is node with the flags, in the pid the launcher started; bin/toolgate stdio is node without them', async () => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-launch-'));
  const port = await freePort();
  const env = {
    PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    TOOLGATE_PORT: String(port),
    TOOLGATE_DATA_DIR: dataDir,
    TOOLGATE_SANDBOX: 'none',
    TOOLGATE_LOG_LEVEL: 'warn',
  };
  try {
    const ready = () =>
      fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
    expect(await launched(['serve'], env, ready)).toEqual(['node', ...SERVE_NODE_FLAGS, LAUNCHER, 'serve']);

    let asked = false;
    let answered = false;
    const stdio = ['stdio', '--root', dataDir, '--sandbox', 'none'];
    const answers = async (child: ChildProcess) => {
      if (!asked) {
        asked = true;
        child.stdout!.once('data', () => (answered = true));
        child.stdin!.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }) + '\n');
      }
      return answered;
    };
    expect(await launched(stdio, env, answers)).toEqual(['node', LAUNCHER, ...stdio]);
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true });
  }
});

test('the service image, the compose gateway and npm start run serve with exactly those flags; the compose executor without', () => {
  const exec = JSON.stringify(['node', ...SERVE_NODE_FLAGS, '/app/dist/bin/toolgate.js', 'serve']).replace(/,/g, ', ');
  const cmd = read('Dockerfile')
    .split('\n')
    .filter((l) => l.startsWith('CMD '));
  expect(cmd).toEqual([`CMD ${exec}`]);

  const compose = read('docker-compose.yml');
  const service = (name: string) => {
    const start = compose.indexOf(`\n  ${name}:\n`);
    expect(start).toBeGreaterThan(-1);
    const rest = compose.slice(start + 1);
    const end = rest.slice(1).search(/\n {2}[a-z-]+:\n/);
    return end === -1 ? rest : rest.slice(0, end + 1);
  };
  expect(service('gateway')).toContain(`    command: ${exec}\n`);
  expect(service('executor')).toContain('    command: ["toolgate", "executor"]\n');

  const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
  expect(pkg.scripts.start).toBe(`exec node ${SERVE_NODE_FLAGS.join(' ')} dist/bin/toolgate.js serve`);
});

test('serve started with them runs and answers (V8 accepts both flags on the command line)', async () => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-launch-'));
  const port = await freePort();
  const child = spawn(process.execPath, [...SERVE_NODE_FLAGS, BIN, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      TOOLGATE_PORT: String(port),
      TOOLGATE_DATA_DIR: dataDir,
      TOOLGATE_SANDBOX: 'none',
      TOOLGATE_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`serve exited: ${err}`);
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      await sleep(50);
    }
    // node rejects an unknown or misspelt V8 flag with a message on stderr.
    expect(err).not.toMatch(/bad option|unknown flag|Error/i);
  } finally {
    child.kill('SIGTERM');
    await exited;
    await fs.rm(dataDir, { recursive: true, force: true });
  }
});

test('a flag given on the command line or in NODE_OPTIONS, with any value, is not added again', () => {
  expect(missingServeFlags([], '')).toEqual([...SERVE_NODE_FLAGS]);
  expect(missingServeFlags(['--max-semi-space-size=8'], '')).toEqual(['--heap-growing-percent=20']);
  expect(missingServeFlags(['--inspect'], '--heap_growing_percent=30 --max-semi-space-size=2')).toEqual([]);
});

const nodes = [process.execPath, ...(process.env.TOOLGATE_TEST_NODE ? [process.env.TOOLGATE_TEST_NODE] : [])];
const canExecve = (node: string) => execFileSync(node, ['-p', 'typeof process.execve'], { encoding: 'utf8' }).trim() === 'function';

test.each(nodes)('serve launched without them by %s runs with them where node can restart in place, same pid, SIGTERM exits 0', async (node) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-launch-'));
  const port = await freePort();
  const child = spawn(node, [BIN, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      TOOLGATE_PORT: String(port),
      TOOLGATE_DATA_DIR: dataDir,
      TOOLGATE_SANDBOX: 'none',
      TOOLGATE_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`serve exited: ${err}`);
      if (
        await fetch(`http://127.0.0.1:${port}/readyz`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      await sleep(50);
    }
    const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    if (canExecve(node)) expect(argv).toEqual([node, ...SERVE_NODE_FLAGS, BIN, 'serve']);
    else expect(argv).toEqual([node, BIN, 'serve']); // Node 20: only the run-time part (see bin/node-flags.ts)
  } finally {
    child.kill('SIGTERM');
  }
  expect(await exited).toBe(0);
  await fs.rm(dataDir, { recursive: true, force: true });
});
