/**
 * The tenant pool over real sandbox agents (backend none): one sandbox per tenant, started once
 * on first use, reused, reaped when idle, displaced when the pool is full, restarted after a
 * death, and workspaces that hostile ids cannot move.
 */
import { existsSync, promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Sandbox, SandboxBackend, SandboxSpec } from '../../executor/sandbox/backend';
import { noneBackend } from '../../executor/sandbox/none';
import { TenantPool, TenantPoolOptions } from '../../executor/tenant-pool';
import { workspaceName } from '../../executor/tenant-names';
import type { BusEvent } from '../../shared/bus/events';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { ErrorCode } from '../../shared/protocol/errors';
import { parsingBackend } from '../helpers/parsing';
import { capturedLogger, sleep, text, until } from './helpers';

const never = () => new AbortController().signal;

/** The real none backend, counting starts and keeping the sandboxes it made. */
function countingBackend(): SandboxBackend & { specs: SandboxSpec[]; sandboxes: Sandbox[] } {
  const inner = parsingBackend(noneBackend());
  const specs: SandboxSpec[] = [];
  const sandboxes: Sandbox[] = [];
  return {
    name: inner.name,
    isolating: inner.isolating,
    specs,
    sandboxes,
    async start(spec) {
      specs.push(spec);
      const s = await inner.start(spec);
      sandboxes.push(s);
      return s;
    },
  };
}

describe('TenantPool', () => {
  let dataDir: string;
  let pool: TenantPool;
  let backend: ReturnType<typeof countingBackend>;
  let events: BusEvent[];

  const makePool = (over: Partial<TenantPoolOptions> = {}) => {
    backend = countingBackend();
    events = [];
    pool = new TenantPool({
      backend,
      dataDir,
      limits: DEFAULT_LIMITS,
      idleMs: 60_000,
      maxSandboxes: 8,
      publish: (e) => events.push(e),
      log: capturedLogger().log,
      ...over,
    });
    return pool;
  };
  const run = (tenant: string, command: string, signal = never()) => pool.call(tenant, 'run_command', { command }, signal);
  const stopped = (tenant: string) => events.filter((e) => e.type === 'sandbox.stopped' && e.tenant === tenant);

  beforeEach(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-pool-'));
  });
  afterEach(async () => {
    await pool?.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('starts a tenant sandbox on first use, once for concurrent first calls, in the tenant workspace', async () => {
    makePool();
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => pool.call('alice', 'write_file', { path: `f${i}.txt`, content: `v${i}` }, never())));
    expect(results.every((r) => !r.isError)).toBe(true);
    expect(backend.specs).toHaveLength(1);
    const workspace = path.join(dataDir, 'workspaces', workspaceName('alice'));
    expect(backend.specs[0]).toMatchObject({ workspace, tenant: 'alice' });
    expect(await fs.readFile(path.join(workspace, 'f3.txt'), 'utf8')).toBe('v3');
    expect(events.filter((e) => e.type === 'sandbox.started')).toEqual([
      expect.objectContaining({ tenant: 'alice', backend: 'none', startMs: expect.any(Number) }),
    ]);
  });

  it('reuses the live sandbox: processes started by one call are there for the next', async () => {
    makePool();
    const started = await pool.call('alice', 'start_process', { command: 'sleep 30' }, never());
    const handle = started.structuredContent?.handle as string;
    const listed = await pool.call('alice', 'list_processes', {}, never());
    expect(JSON.stringify(listed.structuredContent)).toContain(handle);
    expect(backend.specs).toHaveLength(1);
  });

  it('keeps tenants apart: their own sandbox, their own workspace', async () => {
    makePool();
    await Promise.all([run('alice', 'echo a > who'), run('bob', 'echo b > who')]);
    expect(backend.specs.map((s) => s.tenant).sort()).toEqual(['alice', 'bob']);
    expect(text(await pool.call('alice', 'read_file', { path: 'who' }, never()))).toBe('a\n');
    expect(text(await pool.call('bob', 'read_file', { path: 'who' }, never()))).toBe('b\n');
    expect(pool.tenants.sort()).toEqual(['alice', 'bob']);
  });

  it('stops a sandbox after the idle time with no running call, and starts a new one when needed', async () => {
    makePool({ idleMs: 300 });
    const slow = run('alice', 'sleep 0.8; echo done');
    await sleep(500); // longer than idleMs, but a call is running: not idle
    expect(stopped('alice')).toHaveLength(0);
    expect(text(await slow)).toContain('done');
    await until(() => stopped('alice').length === 1);
    expect(stopped('alice')[0]).toMatchObject({ reason: 'idle', backend: 'none' });
    expect(backend.sandboxes[0]!.alive).toBe(false);
    expect(pool.tenants).toEqual([]);
    await run('alice', 'true');
    expect(backend.specs).toHaveLength(2);
  });

  it('displaces the least recently used idle sandbox when full', async () => {
    makePool({ maxSandboxes: 2 });
    await run('a', 'true');
    await run('b', 'true');
    await run('a', 'true'); // b is now the least recently used
    await run('c', 'true');
    await until(() => stopped('b').length === 1);
    expect(stopped('b')[0]).toMatchObject({ reason: 'evicted' });
    expect(stopped('a')).toHaveLength(0);
    expect(pool.tenants.sort()).toEqual(['a', 'c']);
  });

  it('refuses a new tenant with Unavailable when every sandbox is busy, and takes it once one is free', async () => {
    makePool({ maxSandboxes: 2 });
    const busyA = run('a', 'sleep 1');
    const busyB = run('b', 'sleep 1');
    await until(() => backend.sandboxes.length === 2);
    await expect(run('c', 'true')).rejects.toMatchObject({ code: ErrorCode.Unavailable, message: expect.stringMatching(/too many active sandboxes/) });
    await Promise.all([busyA, busyB]);
    expect((await run('c', 'echo ok')).structuredContent?.exitCode).toBe(0);
  });

  it('starts a new sandbox after the old one died', async () => {
    makePool();
    await run('alice', 'echo before > state');
    // The command kills its own agent: the call fails OutcomeUnknown (it had started), never hangs.
    await expect(run('alice', 'kill -9 $PPID; sleep 5')).rejects.toMatchObject({ code: ErrorCode.OutcomeUnknown });
    await until(() => stopped('alice').length === 1);
    expect((stopped('alice')[0] as { reason: string }).reason).toMatch(/^died: /);
    const after = await pool.call('alice', 'read_file', { path: 'state' }, never());
    expect(text(after)).toBe('before\n');
    expect(backend.specs).toHaveLength(2);
  });

  it("starts a new sandbox after one was stopped behind the pool's back", async () => {
    makePool();
    await run('alice', 'true');
    await backend.sandboxes[0]!.stop(); // behind the pool's back
    expect((await run('alice', 'echo again')).structuredContent?.stdout).toBe('again\n');
    expect(backend.specs).toHaveLength(2);
  });

  it('keeps hostile tenant ids inside workspaces/, apart from each other', async () => {
    makePool();
    const ids = ['../escape', '..', '.', 'a/b', '/etc', 'x'.repeat(5000), '\0'];
    for (const id of ids) expect((await pool.call(id, 'write_file', { path: 'id.txt', content: id.slice(0, 20) }, never())).isError).toBeFalsy();
    const dirs = await fs.readdir(path.join(dataDir, 'workspaces'));
    expect(dirs).toHaveLength(ids.length);
    expect((await fs.readdir(dataDir)).sort()).toEqual(['workspaces']);
    expect(existsSync(path.join(dataDir, '..', 'escape'))).toBe(false);
    for (const id of ids) expect(await fs.readFile(path.join(pool.workspaceFor(id), 'id.txt'), 'utf8')).toBe(id.slice(0, 20));
  });

  it('reports a backend that cannot start as Unavailable without its details, and tries again next time', async () => {
    const broken: SandboxBackend = { name: 'broken', isolating: true, start: async () => Promise.reject(new Error('secret detail /srv/x')) };
    makePool({ backend: broken });
    const err = await run('alice', 'true').catch((e: Error) => e);
    expect(err).toMatchObject({ code: ErrorCode.Unavailable });
    expect((err as Error).message).not.toContain('secret detail');
    expect(pool.tenants).toEqual([]);
    await expect(pool.probe()).rejects.toThrow(/secret detail/);
  });

  it("stops the idle sandboxes of tenants whose shard moved to another executor, not a busy one's nor others'", async () => {
    makePool();
    await run('alice', 'true');
    await run('bob', 'true');
    const busy = run('carol', 'sleep 0.5');
    await until(() => backend.specs.length === 3);
    await pool.stopMoved((tenant) => tenant !== 'bob');
    expect(stopped('alice')).toEqual([expect.objectContaining({ reason: 'moved' })]);
    expect(stopped('bob')).toEqual([]);
    expect(stopped('carol')).toEqual([]);
    expect(await busy).toMatchObject({ structuredContent: { exitCode: 0 } });
    expect(pool.tenants.sort()).toEqual(['bob', 'carol']);
  });

  it('close stops every sandbox and refuses later calls', async () => {
    makePool();
    await Promise.all([run('a', 'true'), run('b', 'true')]);
    const pending = run('a', 'sleep 10');
    await sleep(100);
    await pool.close();
    // It was running when its sandbox stopped: it may have run in part.
    await expect(pending).rejects.toMatchObject({ code: ErrorCode.OutcomeUnknown });
    expect(backend.sandboxes.every((s) => !s.alive)).toBe(true);
    expect(events.filter((e) => e.type === 'sandbox.stopped' && e.reason === 'shutdown')).toHaveLength(2);
    await expect(run('a', 'true')).rejects.toMatchObject({ code: ErrorCode.Unavailable });
  });

  it('passes the uid chosen for the tenant to the backend', async () => {
    makePool({ uidFor: (t) => (t === 'alice' ? 1_500_000_123 : 1_500_000_456) });
    // The none backend ignores uids; the spec still carries them. (bwrap enforces them: executor-bwrap.test.ts)
    await Promise.all([run('alice', 'true'), run('bob', 'true')]);
    expect(Object.fromEntries(backend.specs.map((s) => [s.tenant, s.uid]))).toEqual({ alice: 1_500_000_123, bob: 1_500_000_456 });
    const st = await fs.stat(dataDir);
    expect(st.mode & 0o001).toBe(0o001); // searchable, so a tenant uid can reach its workspace
    expect(st.mode & 0o004).toBe(0); // but not listable
    expect((await fs.stat(path.join(dataDir, 'workspaces'))).mode & 0o777).toBe(0o711);
  });
});
