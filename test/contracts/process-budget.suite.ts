/**
 * The contract of the live-process budget per identity (executor/process-budget.ts) over each
 * quota store twin (memory, Redis): real sandbox agents (backend none) in a TenantPool, as an
 * executor runs them. A run_command counts while it runs, a start_process (pipes or pty) until
 * its process ends — by itself or by kill_process — or its sandbox ends; a failed start counts
 * nothing; past the budget the call is refused with -32004 naming the setting, and another
 * identity is untouched. Where two processes can share the store (Redis), two executors' pools
 * draw on one count. Run from one small .test.ts per store.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { ProcessBudget } from '../../executor/process-budget';
import { noneBackend } from '../../executor/sandbox/none';
import { TenantPool } from '../../executor/tenant-pool';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import type { QuotaStore } from '../../shared/quota/store';
import type { ToolResult } from '../../shared/tools/tool';

export interface ProcessBudgetUnderTest {
  /** A fresh store on a clean backend. */
  create(): Promise<QuotaStore>;
  /** Another store on the same backend, as a second executor process would hold (absent: one process only). */
  peer?(): Promise<QuotaStore>;
  reset?(): Promise<void>;
}

const never = () => new AbortController().signal;
const silent = pino({ level: 'silent' });

async function until(check: () => Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** An executor's view: its pool of tenant sandboxes counting processes in `store`. */
interface Executor {
  pool: TenantPool;
  budget: ProcessBudget;
  call(tenant: string, tool: string, args: Record<string, unknown>): Promise<ToolResult>;
  start(tenant: string, argv: string[]): Promise<string>;
}

export function processBudgetContract(name: string, under: ProcessBudgetUnderTest): void {
  describe(`process budget contract: ${name}`, () => {
    const stores: QuotaStore[] = [];
    const pools: TenantPool[] = [];
    const dirs: string[] = [];

    const executor = async (store: QuotaStore, max: number): Promise<Executor> => {
      stores.push(store);
      const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-procs-'));
      dirs.push(dataDir);
      const budget = new ProcessBudget(store, max);
      const pool = new TenantPool({
        backend: noneBackend(),
        dataDir,
        limits: DEFAULT_LIMITS,
        idleMs: 60_000,
        maxSandboxes: 8,
        processes: budget,
        publish: () => undefined,
        log: silent,
      });
      pools.push(pool);
      const call = (tenant: string, tool: string, args: Record<string, unknown>) => pool.call(tenant, tool, args, never());
      return {
        pool,
        budget,
        call,
        async start(tenant, argv) {
          const result = await call(tenant, 'start_process', { argv });
          if (result.isError) throw new Error(`start_process failed: ${JSON.stringify(result.content)}`);
          return (result.structuredContent as { handle: string }).handle;
        },
      };
    };

    afterEach(async () => {
      for (const pool of pools.splice(0)) await pool.close();
      for (const store of stores.splice(0)) await store.close();
      for (const dir of dirs.splice(0)) await fs.rm(dir, { recursive: true, force: true });
      await under.reset?.();
    });

    const refusal = async (work: Promise<unknown>): Promise<ProtocolError> => {
      const err = await work.then(
        () => undefined,
        (e: unknown) => e,
      );
      if (!(err instanceof ProtocolError)) throw new Error(`expected a refusal, got ${String(err)}`);
      return err;
    };

    it('counts a run_command while it runs and a start_process until it ends; past the budget refuses -32004 naming the setting', async () => {
      const ex = await executor(await under.create(), 2);
      await ex.start('greedy', ['sleep', '30']);
      expect(await ex.budget.held('greedy')).toBe(1);
      const running = ex.call('greedy', 'run_command', { argv: ['sleep', '1'] });
      await until(async () => (await ex.budget.held('greedy')) === 2, 'the run_command to be counted');
      const err = await refusal(ex.call('greedy', 'start_process', { argv: ['sleep', '30'] }));
      expect(err.code).toBe(ErrorCode.RateLimited);
      expect(err.message).toContain('TOOLGATE_MAX_PROCESSES_PER_IDENTITY');
      expect(err.data).toMatchObject({ limit: 'processes', max: 2, retryAfterMs: expect.any(Number) });
      expect((await refusal(ex.call('greedy', 'run_command', { argv: ['true'] }))).code).toBe(ErrorCode.RateLimited);
      // Tools that start nothing are not counted.
      expect((await ex.call('greedy', 'list_directory', { path: '.' })).isError).toBeFalsy();
      // Another identity has its own count.
      await ex.start('quiet', ['sleep', '30']);
      expect(await ex.budget.held('quiet')).toBe(1);
      expect((await running).isError).toBeFalsy();
      await until(async () => (await ex.budget.held('greedy')) === 1, 'the run_command share to come back');
    });

    it('a process that exits, one killed, a pty session that ends and a failed start all leave the count as it was', async () => {
      const ex = await executor(await under.create(), 1);
      await ex.start('t', ['sleep', '0.2']);
      await until(async () => (await ex.budget.held('t')) === 0, 'an exited process to return its share');
      const handle = await ex.start('t', ['sleep', '30']);
      expect(await ex.budget.held('t')).toBe(1);
      expect((await ex.call('t', 'kill_process', { handle })).isError).toBeFalsy();
      await until(async () => (await ex.budget.held('t')) === 0, 'a killed process to return its share');
      const shell = await ex.call('t', 'start_process', { command: 'cat', pty: true });
      expect(shell.isError).toBeFalsy();
      expect(await ex.budget.held('t')).toBe(1);
      const pty = (shell.structuredContent as { handle: string }).handle;
      await ex.call('t', 'write_process_input', { handle: pty, input: '', eof: true });
      await until(async () => (await ex.budget.held('t')) === 0, 'an ended pty session to return its share');
      const failed = await ex.call('t', 'start_process', { argv: ['/no/such/program'] });
      expect(failed.isError).toBe(true);
      expect(await ex.budget.held('t')).toBe(0);
      // A process whose leader left a child holding its output stays counted until that ends too.
      const bg = await ex.start('t', ['sh', '-c', 'sleep 30 & exit 0']);
      await until(async () => {
        const list = await ex.call('t', 'list_processes', {});
        return (list.structuredContent as { processes: Array<{ handle: string; running: boolean }> }).processes.some((p) => p.handle === bg && !p.running);
      }, 'the leader to exit');
      expect(await ex.budget.held('t')).toBe(1);
      await ex.call('t', 'kill_process', { handle: bg, signal: 'SIGKILL' });
      await until(async () => (await ex.budget.held('t')) === 0, 'the group to end');
    });

    it('a start_process its caller cancels at any moment leaves the count equal to the processes running', async () => {
      const ex = await executor(await under.create(), 64);
      await ex.call('t', 'list_directory', { path: '.' }); // the sandbox is up: the abort races the start itself
      const running = async () =>
        ((await ex.call('t', 'list_processes', {})).structuredContent as { processes: Array<{ running: boolean }> }).processes.filter((p) => p.running).length;
      // Aborted before the start is sent, while the agent starts it, or after: however it lands,
      // a process the agent started is counted (else it would run outside the budget).
      for (const wait of [0, 0, 0, 1, 1, 2, 2, 3, 5, 8]) {
        const cancel = new AbortController();
        const call = ex.pool.call('t', 'start_process', { argv: ['sleep', '30'] }, cancel.signal).catch(() => undefined);
        if (wait === 0) await Promise.resolve();
        else await new Promise((r) => setTimeout(r, wait));
        cancel.abort();
        await call;
      }
      await until(async () => (await running()) === (await ex.budget.held('t')), 'the count to equal the running processes', 5000);
      process.stdout.write(`(process budget ${name}: ${await running()} of 10 cancelled starts started, all counted)\n`);
    });

    it('a sandbox that ends returns every share its processes held', async () => {
      const ex = await executor(await under.create(), 4);
      for (let i = 0; i < 3; i++) await ex.start('t', ['sleep', '30']);
      expect(await ex.budget.held('t')).toBe(3);
      await ex.pool.close();
      await until(async () => (await ex.budget.held('t')) === 0, 'the stopped sandbox to return its shares');
    });

    if (under.peer) {
      it("two executors draw on one identity's count; another identity is untouched", async () => {
        const a = await executor(await under.create(), 3);
        const b = await executor(await under.peer!(), 3);
        await a.start('t', ['sleep', '30']);
        const onA = await a.start('t', ['sleep', '30']);
        await b.start('t', ['sleep', '30']);
        expect(await a.budget.held('t')).toBe(3);
        expect((await refusal(a.call('t', 'start_process', { argv: ['sleep', '30'] }))).code).toBe(ErrorCode.RateLimited);
        expect((await refusal(b.call('t', 'start_process', { argv: ['sleep', '30'] }))).code).toBe(ErrorCode.RateLimited);
        await b.start('other', ['sleep', '30']);
        await a.call('t', 'kill_process', { handle: onA });
        await until(async () => (await b.budget.held('t')) === 2, 'the kill on one executor to be seen by the other');
        await b.start('t', ['sleep', '30']);
      });
    }
  });
}
