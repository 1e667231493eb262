/**
 * The real `toolgate serve` binary (dist/bin/toolgate.js): first start creates the secret file
 * (0600) and says so, prints where it listens and how to get a token, serves the spec's request
 * with a token from the real `generate-token`, runs tools through the embedded executor, keeps
 * stdout empty, and exits 0 on SIGTERM. Bad configuration stops start-up with a sentence naming it.
 */
import { ChildProcess, execFile, spawn } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { unmountUnder } from '../helpers/mounts';
import { freePort } from '../helpers/ports';

const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');
const GENERATE = path.resolve(__dirname, '../../dist/bin/generate-token.js');

interface Served {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function run(env: Record<string, string>, args: string[] = []): Served & { started: Promise<string> } {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TOOLGATE_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const started = new Promise<string>((resolve, reject) => {
    child.stderr!.setEncoding('utf8').on('data', (c: string) => {
      err += c;
      // The banner ends with the example request line.
      const m = /listening on (http:\/\/\S+)[^]*\ntoolgate serve: then: .*\n/.exec(err);
      if (m) resolve(m[1]!);
    });
    void exit.then(({ code }) => reject(new Error(`serve exited with ${code} before listening:\n${err}`)));
  });
  const served = { child, url: '', stdout: () => out, stderr: () => err, exit, started };
  return served;
}

const children: ChildProcess[] = [];
let dataDir: string;
beforeEach(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-serve-'));
});
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await fs.rm(dataDir, { recursive: true, force: true });
});

async function start(env: Record<string, string>, args: string[] = []): Promise<Served> {
  const s = run(env, args);
  children.push(s.child);
  s.url = await s.started;
  return s;
}

async function generateToken(args: string[], env: Record<string, string>): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [GENERATE, ...args], { env: { PATH: process.env.PATH ?? '', ...env } });
  return stdout.split('\n')[0]!.trim();
}

const jsonOf = async (res: Response | Promise<Response>): Promise<any> => (await res).json();

const specRequest = (url: string, token: string, body: unknown = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }) =>
  fetch(url, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

test('first start: secret file 0600 announced, URL and token hint printed, spec request served, SIGTERM exits 0', async () => {
  const port = await freePort();
  const env = { TOOLGATE_DATA_DIR: dataDir, TOOLGATE_PORT: String(port), TOOLGATE_SANDBOX: 'none' };
  const s = await start(env);
  expect(s.url).toBe(`http://127.0.0.1:${port}/`);
  const secretFile = path.join(dataDir, 'jwt-secret');
  expect(s.stderr()).toContain(`created a new token signing secret in ${secretFile}`);
  expect((await fs.stat(secretFile)).mode & 0o777).toBe(0o600);
  // The printed token command runs our own issuer as written, from any directory.
  const printed = /get a token: +(.+)$/m.exec(s.stderr())?.[1] ?? '';
  expect(printed).toMatch(new RegExp(` token --id alice --url http://127\\.0\\.0\\.1:${port}/$`));
  const elsewhere = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-elsewhere-'));
  const { stdout: issued } = await promisify(execFile)('sh', ['-c', printed], { cwd: elsewhere, env: { PATH: process.env.PATH ?? '' } });
  await fs.rm(elsewhere, { recursive: true });
  const token = issued.split('\n')[0]!.trim();
  const list = await specRequest(s.url, token);
  expect(list.status).toBe(200);
  expect(list.headers.get('content-type')).toMatch(/^application\/json/);
  // The binary runs from dist/: compare with the tools every build has (the README's Permissions table), not the sources.
  expect((await jsonOf(list)).result.tools.map((t: { name: string }) => t.name)).toEqual(
    expect.arrayContaining(['read_file', 'list_directory', 'write_file', 'run_command', 'http_request']),
  );

  const write = await jsonOf(
    specRequest(s.url, token, {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'write_file', arguments: { path: 'hello.txt', content: 'served' } },
    }),
  );
  expect(write.result.isError).toBeFalsy();
  const read = await jsonOf(
    specRequest(s.url, token, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'hello.txt' } } }),
  );
  expect(read.result.content[0].text).toContain('served');

  const forged = await specRequest(s.url, await generateToken(['--id', 'alice', '--secret', 'another-secret'], {}));
  expect(forged.status).toBe(401);
  expect((await fetch(new URL('/readyz', s.url))).status).toBe(200);

  s.child.kill('SIGTERM');
  expect(await s.exit).toEqual({ code: 0, signal: null });
  expect(s.stdout()).toBe('');

  // The second start reuses the secret: no announcement, and the old token still works.
  const again = await start(env);
  expect(again.stderr()).not.toContain('created a new token signing secret');
  expect((await specRequest(again.url, token)).status).toBe(200);
  again.child.kill('SIGINT');
  expect((await again.exit).code).toBe(0);
});

test('SIGTERM lets a running call finish and answers it before exiting', async () => {
  const s = await start({ TOOLGATE_DATA_DIR: dataDir, TOOLGATE_PORT: String(await freePort()), TOOLGATE_SANDBOX: 'none', TOOLGATE_JWT_SECRET: 'graceful' });
  const token = await generateToken(['--id', 'carol'], { TOOLGATE_JWT_SECRET: 'graceful' });
  // Warm the sandbox so the call below is running, not starting, when the signal comes.
  await specRequest(s.url, token, { jsonrpc: '2.0', id: 0, method: 'tools/call', params: { name: 'run_command', arguments: { command: 'true' } } });
  const running = specRequest(s.url, token, {
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'run_command', arguments: { command: 'sleep 1; echo finished' } },
  });
  await new Promise((r) => setTimeout(r, 300));
  s.child.kill('SIGTERM');
  const reply = await jsonOf(running);
  expect(reply.result.structuredContent).toMatchObject({ exitCode: 0, stdout: 'finished\n' });
  expect((await s.exit).code).toBe(0);
  expect(s.stderr()).toContain('SIGTERM: finishing running requests');
});

test('TOOLGATE_JWT_SECRET: no secret file is created', async () => {
  const s = await start({
    TOOLGATE_DATA_DIR: dataDir,
    TOOLGATE_PORT: String(await freePort()),
    TOOLGATE_SANDBOX: 'none',
    TOOLGATE_JWT_SECRET: 'configured-secret',
  });
  await expect(fs.access(path.join(dataDir, 'jwt-secret'))).rejects.toThrow();
  const token = await generateToken(['--id', 'bob'], { TOOLGATE_JWT_SECRET: 'configured-secret' });
  expect((await specRequest(s.url, token)).status).toBe(200);
  s.child.kill('SIGTERM');
  expect((await s.exit).code).toBe(0);
});

test('without TOOLGATE_SANDBOX it picks bwrap when it can run here, else none with a loud warning', async () => {
  const s = await start({ TOOLGATE_DATA_DIR: dataDir, TOOLGATE_PORT: String(await freePort()) });
  const line = /sandbox: (\w+)\)/.exec(s.stderr())?.[1];
  if (line === 'none') expect(s.stderr()).toMatch(/WARNING: no isolating sandbox is available/);
  else expect(line).toBe('bwrap');
  s.child.kill('SIGTERM');
  expect((await s.exit).code).toBe(0);
});

test.each([
  ['TOOLGATE_PORT', '70000'],
  ['TOOLGATE_PORT', 'http'],
  ['TOOLGATE_CALLS_PER_MINUTE', 'lots'],
  ['TOOLGATE_MAX_CONCURRENT_CALLS', '0'],
  ['TOOLGATE_SANDBOX', 'chroot'],
  ['TOOLGATE_MAX_MESSAGE_BYTES', '-1'],
])('a bad %s=%s stops start-up with a sentence naming it', async (name, value) => {
  const s = run({ TOOLGATE_DATA_DIR: dataDir, TOOLGATE_PORT: '1', [name]: value });
  children.push(s.child);
  s.started.catch(() => undefined);
  expect((await s.exit).code).toBe(1);
  expect(s.stderr()).toMatch(new RegExp(`^toolgate: ${name} must be .*"${value}"`, 'm'));
  await expect(fs.access(path.join(dataDir, 'jwt-secret'))).rejects.toThrow();
});

test('a port already in use stops start-up naming the address', async () => {
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  const { port } = blocker.address() as net.AddressInfo;
  try {
    const s = run({ TOOLGATE_DATA_DIR: dataDir, TOOLGATE_PORT: String(port), TOOLGATE_SANDBOX: 'none' });
    children.push(s.child);
    s.started.catch(() => undefined);
    expect((await s.exit).code).toBe(1);
    expect(s.stderr()).toContain(`cannot listen on 127.0.0.1:${port}: the address is already in use`);
  } finally {
    blocker.close();
  }
});

test("flags: --port, --host, --data-dir and --sandbox win over the environment; the banner's token command points at the real address", async () => {
  const [port, envPort] = [await freePort(), await freePort()];
  const flagDir = path.join(dataDir, 'from-flag');
  const s = await start({ TOOLGATE_DATA_DIR: path.join(dataDir, 'from-env'), TOOLGATE_PORT: String(envPort), TOOLGATE_SANDBOX: 'bwrap' }, [
    '--port',
    String(port),
    '--host=127.0.0.1',
    '--data-dir',
    flagDir,
    '--sandbox',
    'none',
  ]);
  expect(s.url).toBe(`http://127.0.0.1:${port}/`);
  expect(s.stderr()).toContain('sandbox: none');
  await fs.access(path.join(flagDir, 'jwt-secret'));
  await expect(fs.access(path.join(dataDir, 'from-env'))).rejects.toThrow();
  // The printed command issues a token whose printed examples name this server, not the default port.
  const printed = /get a token: +(.+)$/m.exec(s.stderr())?.[1] ?? '';
  const { stdout } = await promisify(execFile)('sh', ['-c', printed], { cwd: os.tmpdir(), env: { PATH: process.env.PATH ?? '' } });
  expect(stdout).toContain(`curl -X POST 'http://127.0.0.1:${port}/'`);
  expect(stdout).not.toContain(':3000');
  expect((await specRequest(s.url, stdout.split('\n')[0]!.trim())).status).toBe(200);
  s.child.kill('SIGTERM');
  expect((await s.exit).code).toBe(0);
});

test.each([
  [['--port', '70000'], 1, '--port must be a port number (1-65535), got "70000"'],
  [['--sandbox=chroot'], 1, '--sandbox must be one of none, bwrap, docker, got "chroot"'],
  [['--port'], 2, '--port needs a value'],
  [['--port', '1', '--port', '2'], 2, '--port is given more than once'],
  [['--bogus'], 2, 'unknown option --bogus'],
])('serve %j stops start-up (exit %i) naming the flag', async (args, code, message) => {
  const s = run({ TOOLGATE_DATA_DIR: dataDir }, args);
  children.push(s.child);
  s.started.catch(() => undefined);
  expect((await s.exit).code).toBe(code);
  expect(s.stderr()).toContain(`toolgate: ${message}`);
});

test('warns at start when the data directory lies inside a git work tree (git clean -fdx would delete it), and only then', async () => {
  const checkout = path.join(dataDir, 'checkout');
  await fs.mkdir(path.join(checkout, '.git'), { recursive: true });
  const inside = await start({ TOOLGATE_DATA_DIR: path.join(checkout, '.toolgate'), TOOLGATE_PORT: String(await freePort()), TOOLGATE_SANDBOX: 'none' });
  expect(inside.stderr()).toContain(`inside the git work tree ${checkout}`);
  expect(inside.stderr()).toContain('git clean -fdx');
  inside.child.kill('SIGTERM');
  expect((await inside.exit).code).toBe(0);

  const outside = await start({ TOOLGATE_DATA_DIR: path.join(dataDir, 'own'), TOOLGATE_PORT: String(await freePort()), TOOLGATE_SANDBOX: 'none' });
  expect(outside.stderr()).not.toContain('git work tree');
  outside.child.kill('SIGTERM');
  expect((await outside.exit).code).toBe(0);
});

/** Mount points under `dir` (this process's mount namespace, which the spawned serves share). */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' ')[4]!)
    .filter((m) => m.startsWith(`${dir}/`));
}

describeIf(isRoot && hasCommand('bwrap'), 'needs root and bubblewrap (loop-mounted workspace quotas)', 'two serves on one data directory', () => {
  afterEach(() => unmountUnder(dataDir));

  test("a second serve never unmounts a live one's workspace: not when its port is busy, not when it starts, not when it stops", async () => {
    const env = { TOOLGATE_DATA_DIR: dataDir, TOOLGATE_SANDBOX: 'bwrap', TOOLGATE_WORKSPACE_QUOTA_BYTES: '16M', TOOLGATE_WORKSPACE_QUOTA_INODES: '4096' };
    const port = await freePort();
    const first = await start({ ...env, TOOLGATE_PORT: String(port) });
    const token = await generateToken(['--id', 'alice'], { TOOLGATE_DATA_DIR: dataDir });
    const call = (url: string, name: string, args: Record<string, unknown>) =>
      jsonOf(specRequest(url, token, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }));
    expect((await call(first.url, 'write_file', { path: 'kept.txt', content: 'still here' })).result.isError).toBeFalsy();
    const mounted = mountsUnder(path.join(dataDir, 'workspaces'));
    expect(mounted).toHaveLength(1);
    const markers = (await fs.readdir(path.join(dataDir, 'workspace-images'))).filter((n) => n.endsWith('.owner'));
    expect(markers).toHaveLength(1);
    const stillServed = async () => {
      expect(mountsUnder(path.join(dataDir, 'workspaces'))).toEqual(mounted);
      await fs.access(path.join(dataDir, 'workspace-images', markers[0]!));
      expect((await call(first.url, 'read_file', { path: 'kept.txt' })).result.content[0].text).toContain('still here');
    };

    // The same port: it fails, naming the address, and leaves the first one's mount alone.
    const busy = run({ ...env, TOOLGATE_PORT: String(port) });
    children.push(busy.child);
    busy.started.catch(() => undefined);
    expect((await busy.exit).code).toBe(1);
    expect(busy.stderr()).toContain('the address is already in use');
    await stillServed();

    // Another port: it starts beside the first (same executor id, the host name) and stops again.
    const second = await start({ ...env, TOOLGATE_PORT: String(await freePort()) });
    await stillServed();
    second.child.kill('SIGTERM');
    expect((await second.exit).code).toBe(0);
    await stillServed();

    first.child.kill('SIGTERM');
    expect((await first.exit).code).toBe(0);
    expect(mountsUnder(path.join(dataDir, 'workspaces'))).toEqual([]);
  }, 60_000);
});
