/**
 * The executor end to end over the in-process bus, with real sandbox agents (backend none; bwrap
 * for two tenants, since none serves one identity only): tenants kept apart, trusted tools run in the executor, and the executor's own checks on
 * every job (it trusts nothing the gateway did).
 */
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { Executor, startExecutor } from '../../executor/executor';
import { workspaceName } from '../../executor/tenant-names';
import { ErrorCode } from '../../shared/protocol/errors';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { call, CapturingBus, capturedLogger, job, sleep, testConfig, text, until } from './helpers';

describe('executor (in-process bus, sandbox none)', () => {
  let dataDir: string;
  let bus: CapturingBus;
  let executor: Executor | undefined;
  // A job's control that nobody but the handler aborts.
  const never = () => new AbortController();

  const start = async (env: Record<string, string> = {}) => {
    bus = new CapturingBus();
    executor = await startExecutor({ config: testConfig(dataDir, env), bus, log: capturedLogger().log });
  };

  beforeEach(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-exec-'));
  });
  afterEach(async () => {
    await executor?.close();
    executor = undefined;
    await bus?.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  describe('tenants', () => {
    // Two tenants need a wall between them: bwrap (as root); `none` serves one identity (below).
    describeIf(hasCommand('bwrap') && isRoot, 'two tenants need bubblewrap, run as root', 'two tenants on bwrap', () => {
      const startTwo = () => start({ TOOLGATE_SANDBOX: 'bwrap' });

      it("runs two tenants in parallel (bwrap), neither reaching the other's files", async () => {
        await startTwo();
        const aDir = workspaceName('tenant-a');
        const aRoot = path.join(dataDir, 'workspaces', aDir);
        await Promise.all([
          call(bus, 'tenant-a', 'write_file', { path: 'secret.txt', content: 'A-ONLY' }),
          call(bus, 'tenant-b', 'write_file', { path: 'mine.txt', content: 'B' }),
        ]);
        expect(await fs.readFile(path.join(aRoot, 'secret.txt'), 'utf8')).toBe('A-ONLY');

        const attempts = await Promise.all([
          call(bus, 'tenant-b', 'read_file', { path: `../${aDir}/secret.txt` }),
          call(bus, 'tenant-b', 'read_file', { path: path.join(aRoot, 'secret.txt') }),
          call(bus, 'tenant-b', 'list_directory', { path: '..' }),
          call(bus, 'tenant-b', 'list_directory', { path: aRoot }),
          call(bus, 'tenant-b', 'search_files', { path: '..', pattern: '**/secret.txt' }),
          call(bus, 'tenant-b', 'get_file_info', { path: `../${aDir}` }),
        ]);
        for (const r of attempts) {
          expect(r.isError).toBe(true);
          expect(text(r)).toMatch(/outside the workspace/);
          expect(text(r)).not.toContain('A-ONLY');
        }
        const own = await call(bus, 'tenant-b', 'list_directory', {});
        expect((own.structuredContent?.entries as Array<{ name: string }>).map((e) => e.name)).toEqual(['mine.txt']);
      });

      it("does not know the other tenant's process handles (bwrap)", async () => {
        await startTwo();
        const started = await call(bus, 'tenant-a', 'start_process', { command: 'sleep 30' });
        const handle = started.structuredContent?.handle as string;
        expect(handle).toBeTruthy();
        const read = await call(bus, 'tenant-b', 'read_process_output', { handle });
        expect(read.isError).toBe(true);
        expect(text(read)).toMatch(/Unknown process handle/);
        const kill = await call(bus, 'tenant-b', 'kill_process', { handle });
        expect(kill.isError).toBe(true);
        expect((await call(bus, 'tenant-b', 'list_processes', {})).structuredContent?.processes).toEqual([]);
        const still = await call(bus, 'tenant-a', 'list_processes', {});
        expect(still.structuredContent?.processes).toEqual([expect.objectContaining({ handle, running: true })]);
      });
    });

    it('on none serves the first identity that calls and refuses every other, saying why', async () => {
      await start();
      await call(bus, 'tenant-a', 'write_file', { path: 'secret.txt', content: 'A-ONLY' });
      for (const [tool, args] of [
        ['read_file', { path: `../${workspaceName('tenant-a')}/secret.txt` }],
        ['run_command', { command: 'cat ../*/secret.txt' }],
        ['list_directory', {}],
      ] as const) {
        await expect(call(bus, 'tenant-b', tool, args)).rejects.toMatchObject({
          code: ErrorCode.PermissionDenied,
          message: expect.stringMatching(/sandbox \(TOOLGATE_SANDBOX=none\).*single identity/),
        });
      }
      // Nothing of tenant-b's ever started: no workspace, no sandbox.
      expect(await fs.readdir(path.join(dataDir, 'workspaces'))).toEqual([workspaceName('tenant-a')]);
      expect((await call(bus, 'tenant-a', 'read_file', { path: 'secret.txt' })).structuredContent?.content).toBe('A-ONLY');
    });

    it('on none serves only TOOLGATE_NONE_IDENTITY when it is set, even before that identity calls', async () => {
      await start({ TOOLGATE_NONE_IDENTITY: 'tenant-b' });
      await expect(call(bus, 'tenant-a', 'list_directory', {})).rejects.toMatchObject({ code: ErrorCode.PermissionDenied });
      expect((await call(bus, 'tenant-b', 'list_directory', {})).isError).toBeFalsy();
    });

    it('publishes sandbox lifecycle events and stops every sandbox on close', async () => {
      await start();
      await call(bus, 'tenant-a', 'run_command', { command: 'true' });
      await until(() => bus.events.some((e) => e.type === 'sandbox.started'));
      await executor!.close();
      executor = undefined;
      await until(() => bus.events.some((e) => e.type === 'sandbox.stopped'));
      expect(bus.events.find((e) => e.type === 'sandbox.stopped')).toMatchObject({ tenant: 'tenant-a', reason: 'shutdown' });
    });
  });

  describe('deadlines and cancellation', () => {
    beforeEach(() => start());

    it('aborts a command when the deadline passes, so it has no later effect', async () => {
      const now = Date.now();
      const r = call(bus, 'tenant-a', 'run_command', { command: 'sleep 1.5; touch late' }, { deadline: now + 500, startBy: now + 500 });
      await expect(r).rejects.toMatchObject({ code: ErrorCode.Timeout });
      await sleep(1800);
      await expect(fs.stat(path.join(dataDir, 'workspaces', workspaceName('tenant-a'), 'late'))).rejects.toMatchObject({ code: 'ENOENT' });
    });

    it('aborts a command the caller cancels', async () => {
      const controller = new AbortController();
      const r = call(bus, 'tenant-a', 'run_command', { command: 'sleep 1.5; touch late' }, {}, controller.signal);
      setTimeout(() => controller.abort(), 300);
      await expect(r).rejects.toMatchObject({ code: ErrorCode.Cancelled });
      await sleep(1800);
      await expect(fs.stat(path.join(dataDir, 'workspaces', workspaceName('tenant-a'), 'late'))).rejects.toMatchObject({ code: 'ENOENT' });
    });
  });

  describe('trusted tools', () => {
    let server: http.Server;
    let port: number;
    beforeAll(async () => {
      server = http.createServer((_req, res) => res.end('from-loopback'));
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as { port: number }).port;
    });
    afterAll(() => new Promise<void>((r) => server.close(() => r())));

    it('runs http_request in the executor behind the SSRF guard', async () => {
      await start();
      const refused = await call(bus, 'tenant-a', 'http_request', { url: `http://127.0.0.1:${port}/` });
      expect(refused.isError).toBe(true);
      expect(text(refused)).not.toContain('from-loopback');
    });

    it('honours TOOLGATE_HTTP_ALLOW', async () => {
      await start({ TOOLGATE_HTTP_ALLOW: `127.0.0.1:${port}` });
      const r = await call(bus, 'tenant-a', 'http_request', { url: `http://127.0.0.1:${port}/` });
      expect(r.isError).toBeFalsy();
      expect(r.structuredContent).toMatchObject({ status: 200, body: 'from-loopback' });
      // It ran here: no sandbox was needed.
      await sleep(20);
      expect(bus.events.some((e) => e.type === 'sandbox.started')).toBe(false);
    });
  });

  describe('defence in depth: jobs the gateway should never have sent', () => {
    beforeEach(() => start());
    const handle = (j: ReturnType<typeof job>) => bus.handler!(j, never());
    const workspaces = () => fs.readdir(path.join(dataDir, 'workspaces'));

    it('refuses a tool the job lacks the permission for, before any sandbox starts', async () => {
      const j = job('tenant-x', 'run_command', { command: 'touch pwned' }, { permissions: ['file:read'] });
      await expect(handle(j)).rejects.toMatchObject({ code: ErrorCode.PermissionDenied, data: { permission: 'system:exec' } });
      expect(await workspaces()).toEqual([]);
    });

    it('refuses an unknown tool', async () => {
      await expect(handle(job('tenant-x', 'rm_rf', {}))).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
    });

    it('answers arguments that fail the schema with an isError result naming the field', async () => {
      const r = await handle(job('tenant-x', 'write_file', { path: 42 }));
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/Invalid arguments for write_file: path/);
      expect(await workspaces()).toEqual([]);
    });

    it('refuses a job past its deadline or its start-by time', async () => {
      const past = Date.now() - 1;
      await expect(handle(job('tenant-x', 'run_command', { command: 'touch late' }, { deadline: past }))).rejects.toMatchObject({ code: ErrorCode.Timeout });
      await expect(handle(job('tenant-x', 'run_command', { command: 'touch late' }, { startBy: past }))).rejects.toMatchObject({ code: ErrorCode.Unavailable });
      expect(await workspaces()).toEqual([]);
    });

    it('aborts a running job at its deadline by itself, even when the bus does not', async () => {
      const now = Date.now();
      const j = job('tenant-x', 'run_command', { command: 'sleep 1.5; touch late' }, { deadline: now + 400, startBy: now + 400 });
      await expect(handle(j)).rejects.toMatchObject({ code: ErrorCode.Timeout });
      await sleep(1800);
      await expect(fs.stat(path.join(dataDir, 'workspaces', workspaceName('tenant-x'), 'late'))).rejects.toMatchObject({ code: 'ENOENT' });
    });

    it('refuses malformed jobs', async () => {
      for (const bad of [{ tenant: '' }, { tenant: 7 }, { permissions: 'file:read' }, { deadline: Number.NaN }, { tool: undefined }]) {
        await expect(handle(job('tenant-x', 'list_directory', {}, bad as never))).rejects.toMatchObject({ code: expect.any(Number) });
      }
      expect(await workspaces()).toEqual([]);
    });
  });

  it('fails start-up when the sandbox backend cannot run', async () => {
    bus = new CapturingBus();
    // bwrap refuses a workspace tree its sandbox users cannot reach: a data directory below a
    // directory that only root may enter.
    const locked = path.join(dataDir, 'locked');
    await fs.mkdir(locked, { mode: 0o700 });
    const config = testConfig(path.join(locked, 'data'), { TOOLGATE_SANDBOX: 'bwrap' });
    await expect(startExecutor({ config, bus, log: capturedLogger().log })).rejects.toThrow(/searchable|not writable|bwrap|sandbox/i);
  });
});
