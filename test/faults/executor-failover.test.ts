/**
 * Fault: executor failover through shard leases. Real processes: redis-server, `toolgate serve`
 * (the gateway), two `toolgate executor`s on bwrap, both candidates for the one shard
 * (TOOLGATE_EXECUTOR_SHARDS=all) under their own TOOLGATE_EXECUTOR_IDs. The first holds the
 * shard's lease; the second is a standby. SIGKILL the holder: the standby takes the shard over
 * within TOOLGATE_SHARD_LEASE_MS (and the third of it between its tries), the call that was
 * running gets -32010 and never runs again, new calls are served. A tenant whose workspace is
 * in the dead executor's own data directory gets a clear -32006 naming that executor; with one
 * shared data directory its files are there. SIGTERM (a rolling upgrade): queued calls are not
 * failed and run on the other executor.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Redis from 'ioredis';
import { shardLeaseKey } from '../../shared/bus/shard-leases';
import { ErrorCode } from '../../shared/protocol/errors';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { Answer, eventually, FaultStack, killGroup, note, resultOf, sleep } from './stack';

jest.setTimeout(60_000);

const LEASE_MS = 2000;
const ENV = {
  TOOLGATE_SHARD_LEASE_MS: String(LEASE_MS),
  TOOLGATE_EXECUTOR_SHARDS: 'all',
  // Two executors may share one data directory here: one loop-mounted image per workspace would be mounted twice.
  TOOLGATE_WORKSPACE_QUOTA_BYTES: '0',
  TOOLGATE_TENANT_CONCURRENCY: '8',
};
const LEASE_KEY = shardLeaseKey('toolgate:', 0);

describeIf(hasCommand('bwrap') && isRoot, 'needs bubblewrap and root (several identities need a separating sandbox)', 'fault: executor failover', () => {
  describeRedis('shard leases between two executors', () => {
    let redis: TestRedis;
    let admin: Redis;
    let stack: FaultStack | undefined;
    const dirs: string[] = [];
    const leftovers: number[] = [];

    beforeAll(async () => {
      redis = await startRedis();
      admin = new Redis(redis.url);
    });
    afterEach(async () => {
      leftovers.splice(0).forEach(killGroup);
      await stack?.close();
      stack = undefined;
      for (const d of dirs.splice(0)) await fs.rm(d, { recursive: true, force: true });
      await admin.flushall();
    });
    afterAll(async () => {
      admin?.disconnect();
      await redis?.close();
    });

    const holder = async () => (await admin.get(LEASE_KEY))?.split(' ')[0];

    /** The stack with executor fault-0 (holding the shard) and the standby fault-1, on its own data directory unless `shared`. */
    async function twoExecutors(shared: boolean, env: Record<string, string> = {}): Promise<FaultStack> {
      stack = await FaultStack.start({ redis, executors: 1, sandbox: 'bwrap', env: { ...ENV, ...env } });
      expect(await holder()).toBe('fault-0');
      let standbyEnv: Record<string, string> = {};
      if (!shared) {
        const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-standby-')));
        await fs.chmod(dir, 0o711);
        dirs.push(dir);
        standbyEnv = { TOOLGATE_DATA_DIR: dir };
      }
      await stack.startExecutor(standbyEnv);
      await sleep(LEASE_MS / 2);
      expect(await holder()).toBe('fault-0');
      return stack;
    }

    /** Waits until fault-1 holds the lease; returns how long after `since` it took. */
    async function takeover(since: number): Promise<number> {
      await eventually(async () => (await holder()) === 'fault-1', 'the standby to take the shard', LEASE_MS * 3);
      return performance.now() - since;
    }

    it('SIGKILL: the standby takes over within the lease; the running call gets -32010 and never re-runs; a workspace on the dead executor is a clear error', async () => {
      const s = await twoExecutors(false);
      const alpha = s.token('alpha');
      resultOf(await s.call(alpha, 'write_file', { path: 'note.txt', content: 'kept\n' }));
      const running: Promise<Answer> = s.call(
        alpha,
        'run_command',
        { command: 'echo $$ >> runs.log; sleep 20', timeout_ms: 30_000 },
        { id: 'alpha-job', timeoutMs: 30_000 },
      );
      await eventually(() => s.linesOf('alpha', 'runs.log').length > 0, 'the command to start');
      leftovers.push(Number(s.linesOf('alpha', 'runs.log')[0]));

      const killedAt = performance.now();
      await s.kill(s.executors[0]!, 'SIGKILL');
      // Watched from the kill: the running call's answer comes later (its lock, TOOLGATE_JOB_LOCK_MS, must lapse first).
      const tookOver = takeover(killedAt);
      const got = await running;
      expect(got).toMatchObject({ status: 200, reply: { id: 'alpha-job', error: { code: ErrorCode.OutcomeUnknown } } });
      const tookMs = await tookOver;
      expect(tookMs).toBeLessThan(LEASE_MS + LEASE_MS / 3 + 1500);

      // A tenant new to the shard is served by the new owner.
      expect(resultOf(await s.call(s.token('beta'), 'run_command', { command: 'echo served' }))).toMatchObject({ stdout: 'served\n', exitCode: 0 });
      // alpha's workspace is in fault-0's data directory, which fault-1 cannot reach: said, never an empty workspace.
      const refused = await s.call(alpha, 'read_file', { path: 'note.txt' });
      expect(refused).toMatchObject({
        status: 200,
        reply: { error: { code: ErrorCode.Unavailable, message: expect.stringMatching(/executor "fault-0".*cannot reach/) } },
      });

      // Past several stall checks of the new owner: the interrupted command ran once.
      await sleep(3000);
      expect(s.linesOf('alpha', 'runs.log')).toHaveLength(1);
      note(
        'executor failover (SIGKILL)',
        `standby held the shard ${Math.round(tookMs)} ms after the kill (lease ${LEASE_MS} ms); running call -32010, ran once`,
      );
    });

    it('SIGKILL with a shared data directory: the new owner serves the tenant its own files', async () => {
      const s = await twoExecutors(true);
      const alpha = s.token('alpha');
      resultOf(await s.call(alpha, 'write_file', { path: 'note.txt', content: 'kept\n' }));
      const killedAt = performance.now();
      await s.kill(s.executors[0]!, 'SIGKILL');
      const tookMs = await takeover(killedAt);
      expect(resultOf(await s.call(alpha, 'read_file', { path: 'note.txt' }))).toMatchObject({ content: 'kept\n' });
      note('executor failover (shared data directory)', `standby served the tenant's files ${Math.round(tookMs)} ms after the kill`);
    });

    it('SIGTERM: the shard is handed over and queued calls run on the other executor, none failed', async () => {
      const s = await twoExecutors(true, { TOOLGATE_EXECUTOR_CONCURRENCY: '1' });
      const alpha = s.token('alpha');
      const first = s.call(alpha, 'run_command', { command: 'echo $$ >> runs.log; sleep 1.5; echo first' }, { id: 'first' });
      await eventually(() => s.linesOf('alpha', 'runs.log').length > 0, 'the first command to start');
      const queued = Array.from({ length: 4 }, (_, i) => s.call(alpha, 'run_command', { command: `echo queued-${i}` }, { id: `q${i}` }));
      await sleep(200);
      const stoppedAt = performance.now();
      await s.kill(s.executors[0]!, 'SIGTERM');
      const stopMs = performance.now() - stoppedAt;
      expect(resultOf(await first)).toMatchObject({ stdout: 'first\n' });
      const answers = await Promise.all(queued);
      answers.forEach((a, i) => expect(resultOf(a)).toMatchObject({ stdout: `queued-${i}\n`, exitCode: 0 }));
      expect(await holder()).toBe('fault-1');
      expect(s.executors[0]!.stderr()).toContain('serving shard (lease taken)');
      note('executor failover (SIGTERM)', `holder exited ${Math.round(stopMs)} ms after SIGTERM; its 4 queued calls ran on the other executor`);
    });
  });
});
