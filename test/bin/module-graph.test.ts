/**
 * What a real process loads at rest (every loaded module stays resident: the README's memory
 * targets). `toolgate serve` on Redis is only a gateway: no executor, sandbox, docker, node-pty,
 * undici (the shim's and http_request's HTTP client) or diff, and of bullmq and
 * rate-limiter-flexible only the classes it uses (not their indexes, which load every backend
 * they have). The sandbox agent answers file and command calls without zod (the executor parsed
 * their arguments), undici, node-pty, diff or anything of the gateway's. Each process runs from dist/ with a
 * preload (fixtures/loaded-modules.js) that lists require.cache on SIGUSR2.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { signToken } from '../../shared/auth/token';
import { freePort } from '../helpers/ports';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';

const DIST = path.resolve(__dirname, '../../dist');
const BIN = path.join(DIST, 'bin/toolgate.js');
const AGENT = path.join(DIST, 'executor/agent/main.js');
const PRELOAD = path.join(__dirname, 'fixtures/loaded-modules.js');

/** Module files matching any of these must not be loaded, named by what they are. */
const GATEWAY_MUST_NOT_LOAD: Record<string, RegExp> = {
  'the executor': /\/dist\/executor\//,
  'the sandbox agent or backends': /\/dist\/executor\/(agent|sandbox)\//,
  dockerode: /\/node_modules\/dockerode\//,
  'node-pty': /\/node_modules\/node-pty\//,
  undici: /\/node_modules\/undici\//,
  diff: /\/node_modules\/diff\//,
  'the shim': /\/dist\/shim\//,
  'the stdio command': /\/dist\/bin\/commands\/stdio\.js$/,
  // The bus uses three of bullmq's classes; its index adds a PostgreSQL backend, flows and relays.
  "bullmq's index or PostgreSQL backend": /\/node_modules\/bullmq\/dist\/cjs\/(index\.js$|postgres\/)/,
  // The quotas use the Redis and Memory limiters; the index loads every store it supports.
  "rate-limiter-flexible's index": /\/node_modules\/rate-limiter-flexible\/(index\.js$|lib\/RateLimiterMongo)/,
};
const AGENT_MUST_NOT_LOAD: Record<string, RegExp> = {
  zod: /\/node_modules\/zod\//,
  undici: /\/node_modules\/undici\//,
  'node-pty': /\/node_modules\/node-pty\//,
  diff: /\/node_modules\/diff\//,
  dockerode: /\/node_modules\/dockerode\//,
  'the gateway': /\/dist\/gateway\//,
  koa: /\/node_modules\/koa\//,
  bullmq: /\/node_modules\/bullmq\//,
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let workDir: string;
const children: ChildProcess[] = [];
beforeEach(async () => {
  workDir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-modules-')));
});
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await fs.rm(workDir, { recursive: true, force: true });
});

function spawnWithPreload(args: string[], env: Record<string, string>): { child: ChildProcess; stderr: () => string } {
  const child = spawn(process.execPath, ['-r', PRELOAD, ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err = (err + c).slice(-4000)));
  return { child, stderr: () => err };
}

/** The module files the process has loaded now (asks the preload, waits for its file). */
async function loadedModules(child: ChildProcess, file: string): Promise<string[]> {
  await fs.rm(file, { force: true });
  child.kill('SIGUSR2');
  for (;;) {
    try {
      return JSON.parse(await fs.readFile(file, 'utf8')) as string[];
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      if (child.exitCode !== null || child.signalCode !== null) throw new Error('the process exited before listing its modules');
      await sleep(20);
    }
  }
}

function offending(modules: readonly string[], rules: Record<string, RegExp>): string[] {
  return Object.entries(rules).flatMap(([what, pattern]) => {
    const hit = modules.find((m) => pattern.test(m));
    return hit ? [`${what} (${path.relative(path.resolve(DIST, '..'), hit)})`] : [];
  });
}

describeRedis('toolgate serve on Redis: the gateway alone', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.close();
  });

  test('after start-up and a tools/list it has loaded the gateway and bullmq, and nothing of the executor, sandboxes, docker, node-pty, undici or diff', async () => {
    const port = await freePort();
    const secret = randomBytes(32).toString('hex');
    const list = path.join(workDir, 'modules.json');
    const { child, stderr } = spawnWithPreload([BIN, 'serve'], {
      TOOLGATE_REDIS_URL: redis.url,
      TOOLGATE_PORT: String(port),
      TOOLGATE_DATA_DIR: workDir,
      TOOLGATE_JWT_SECRET: secret,
      TOOLGATE_LOG_LEVEL: 'warn',
      LOADED_MODULES_FILE: list,
    });
    const url = `http://127.0.0.1:${port}/`;
    // Up once it answers (/readyz stays 503: no executor consumes the shard); a start-up failure shows its stderr.
    for (;;) {
      if (child.exitCode !== null) throw new Error(`serve exited: ${stderr()}`);
      const ok = await fetch(`${url}healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      await sleep(50);
    }
    const iat = Math.floor(Date.now() / 1000) - 5;
    const token = signToken({ id: 'alice', permissions: ['file:read', 'network:http', 'system:exec'], iat, exp: iat + 600 }, secret);
    const res = await fetch(url, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    const names = ((await res.json()) as any).result.tools.map((t: { name: string }) => t.name);
    expect(names).toEqual(expect.arrayContaining(['read_file', 'run_command', 'http_request']));

    const modules = await loadedModules(child, list);
    // The preload sees what the process runs (else the check below proves nothing).
    expect(modules.some((m) => m.includes('/dist/gateway/app.js'))).toBe(true);
    expect(modules.some((m) => m.includes('/node_modules/bullmq/'))).toBe(true);
    expect(offending(modules, GATEWAY_MUST_NOT_LOAD)).toEqual([]);
  });
});

test('the sandbox agent answers read_file, list_directory and run_command without loading zod, undici, node-pty, diff, docker or the gateway', async () => {
  const ws = path.join(workDir, 'ws');
  await fs.mkdir(ws);
  await fs.writeFile(path.join(ws, 'a.txt'), 'hello\n');
  const list = path.join(workDir, 'modules.json');
  const { child, stderr } = spawnWithPreload([AGENT, '--root', ws], { LOADED_MODULES_FILE: list });
  // Answers by id; notifications (a process's end) are skipped.
  const waiting = new Map<number, (reply: any) => void>();
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => {
    out += c;
    for (let nl = out.indexOf('\n'); nl !== -1; nl = out.indexOf('\n')) {
      const msg = JSON.parse(out.slice(0, nl));
      out = out.slice(nl + 1);
      if (typeof msg.id === 'number') waiting.get(msg.id)?.(msg);
    }
  });
  const exited = new Promise<never>((_, reject) => child.once('exit', () => reject(new Error(`the agent exited: ${stderr()}`))));
  let nextId = 0;
  // Arguments as the executor sends them: already parsed (defaults filled in).
  const call = (name: string, args: Record<string, unknown>) => {
    const id = ++nextId;
    const reply = new Promise<any>((resolve) => waiting.set(id, resolve));
    child.stdin!.write(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }) + '\n');
    return Promise.race([reply, exited]);
  };

  const read = await call('read_file', { path: 'a.txt' });
  expect(read.result.content[0].text).toContain('hello');
  const listed = await call('list_directory', { path: '.', details: false });
  expect(listed.result.isError).toBeUndefined();
  expect(JSON.stringify(listed.result.content)).toContain('a.txt');
  const ran = await call('run_command', { argv: ['cat', 'a.txt'] });
  expect(ran.result.structuredContent).toMatchObject({ exitCode: 0, stdout: 'hello\n' });

  const modules = await loadedModules(child, list);
  expect(modules.some((m) => m.includes('/dist/shared/tools/files/read-file.js'))).toBe(true);
  expect(modules.some((m) => m.includes('/dist/shared/tools/commands/run-command.js'))).toBe(true);
  expect(offending(modules, AGENT_MUST_NOT_LOAD)).toEqual([]);
  child.stdin!.end();
});
