/**
 * Attack set: one identity tries to hold more live processes than TOOLGATE_MAX_PROCESSES_PER_IDENTITY
 * by spreading them over executors (several consume its shard, each with a sandbox of its own,
 * each allowing TOOLGATE_MAX_PROCESSES), and by keeping run_command calls running. Real
 * `toolgate serve` and `toolgate executor` processes on bwrap: two executors on one Redis
 * (the count is shared through it), and `serve` alone (the count in memory).
 *
 * Each start beyond the budget is a probe: refused when it gets -32004 `limit: "processes"`,
 * leaked when a process started (or more of the identity's `sleep`s run on the host than the
 * budget). Another identity must be served meanwhile; a process that ends, or is killed, returns
 * its share; an executor SIGKILLed with processes counted has its leases lapse (6 s), and its
 * sandboxes' processes die with it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRedisQuotaStore, RedisQuotaStore } from '../../shared/quota/redis';
import { quotaKey } from '../../shared/quota/store';
import { ancestors, Answer, eventually, FaultStack, note, resultOf } from '../faults/stack';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { tally } from './tally';

const BUDGET = 4;
const ENV = {
  TOOLGATE_MAX_PROCESSES_PER_IDENTITY: String(BUDGET),
  // Two executors share one data directory here: one loop-mounted image per workspace would be mounted twice.
  TOOLGATE_WORKSPACE_QUOTA_BYTES: '0',
  TOOLGATE_TENANT_CONCURRENCY: '8',
  TOOLGATE_EXECUTOR_CONCURRENCY: '8',
  // Both executors serve the one shard at once (no lease), so one identity's calls reach both.
  TOOLGATE_SHARD_LEASE_MS: '0',
};

const code = (a: Answer) => ('failure' in a ? a.failure : (a.reply.error?.code ?? (a.reply.result?.isError ? 'isError' : 'ok')));
const limitOf = (a: Answer) => ('failure' in a ? undefined : (a.reply.error?.data as { limit?: string } | undefined)?.limit);
const describeAnswer = (a: Answer) => ('failure' in a ? a.failure : JSON.stringify(a.reply).slice(0, 300));

/** Host pids of processes whose argv is exactly `sleep <seconds>`. */
function sleepers(seconds: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').filter(Boolean);
      if (argv.length === 2 && argv[0]!.endsWith('sleep') && argv[1] === seconds) found.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

describeIf(hasCommand('bwrap') && isRoot, 'needs bubblewrap and root (several identities need a separating sandbox)', 'process quota', () => {
  describeRedis('live processes per identity: two executor processes on one Redis', () => {
    const SET = 'process-quota[bullmq, 2 executors]';
    let redis: TestRedis;
    let stack: FaultStack;
    let observer: RedisQuotaStore;
    let next = 7000;
    /** A fresh `sleep N` argv whose N no other probe uses, so its host process can be found. */
    const sleeper = () => String(next++);
    const held = (id: string) => observer.held(quotaKey.processes(id));

    beforeAll(async () => {
      redis = await startRedis();
      stack = await FaultStack.start({ redis, executors: 2, sandbox: 'bwrap', env: ENV });
      observer = await createRedisQuotaStore({ redis: redis.config });
    }, 90_000);
    afterAll(async () => {
      await observer?.close();
      await stack?.close();
      await redis?.close();
    });

    /** Which executor (index in stack.executors) runs the host process `sleep <n>`, or -1. */
    const ownerOf = (n: string): number => {
      const [pid] = sleepers(n);
      if (pid === undefined) return -1;
      const chain = ancestors(pid);
      return stack.executors.findIndex((e) => chain.includes(e.pid));
    };

    test('one identity holds at most the budget across both executors, sequentially and in a burst; another is served', async () => {
      const greedy = stack.token('greedy');
      const owners: number[] = [];
      const started: string[] = [];
      for (let i = 0; i < BUDGET + 3; i++) {
        const n = sleeper();
        const a = await stack.call(greedy, 'start_process', { argv: ['sleep', n] }, { id: i });
        if (i < BUDGET) {
          expect(code(a)).toBe('ok');
          started.push(n);
          owners.push(ownerOf(n));
        } else {
          const refused = code(a) === -32004 && limitOf(a) === 'processes';
          tally.probe(SET, refused, code(a) === 'ok' || sleepers(n).length > 0);
          expect(refused).toBe(true);
          if ('reply' in a) expect(a.reply.error!.message).toContain('TOOLGATE_MAX_PROCESSES_PER_IDENTITY');
        }
      }
      // run_command counts too: with the budget held, a command is refused.
      const cmd = await stack.call(greedy, 'run_command', { argv: ['true'] });
      tally.probe(SET, code(cmd) === -32004 && limitOf(cmd) === 'processes', code(cmd) === 'ok');
      expect(await held('greedy')).toBe(BUDGET);
      note(SET, `sequential starts ran on executors ${owners.join(',')}`);
      expect(owners.every((o) => o >= 0)).toBe(true);

      // Another identity is untouched by greedy's full budget, on both executors.
      const quiet = stack.token('quiet');
      const quietAnswers = await Promise.all(Array.from({ length: 4 }, (_, i) => stack.call(quiet, 'run_command', { argv: ['true'] }, { id: i })));
      expect(quietAnswers.map(code)).toEqual(['ok', 'ok', 'ok', 'ok']);

      // Freed by killing the host processes (they exit: the agents report it), then a burst of
      // 3 × budget concurrent starts: both executors take jobs at once, exactly the budget runs.
      for (const n of started) for (const pid of sleepers(n)) process.kill(pid, 'SIGKILL');
      await eventually(async () => (await held('greedy')) === 0, 'greedy’s exited processes to return their shares');
      const burst = Array.from({ length: 3 * BUDGET }, () => sleeper());
      const answers = await Promise.all(burst.map((n, i) => stack.call(greedy, 'start_process', { argv: ['sleep', n] }, { id: i })));
      const ok = burst.filter((_, i) => code(answers[i]!) === 'ok');
      expect(ok.length).toBe(BUDGET);
      for (let i = 0; i < burst.length; i++) {
        if (code(answers[i]!) === 'ok') continue;
        const refused = code(answers[i]!) === -32004 && limitOf(answers[i]!) === 'processes';
        if (!refused) throw new Error(`unexpected answer: ${describeAnswer(answers[i]!)}`);
        tally.probe(SET, refused, sleepers(burst[i]!).length > 0);
      }
      const burstOwners = ok.map(ownerOf);
      note(SET, `burst: ${ok.length} of ${burst.length} started, on executors ${burstOwners.join(',')}`);
      // The host agrees: exactly the budget of greedy's sleeps live, whatever executor runs them.
      const live = burst.filter((n) => sleepers(n).length > 0).length;
      tally.probe(SET, live === BUDGET, live > BUDGET);
      expect(live).toBe(BUDGET);
      expect(new Set([...owners, ...burstOwners]).size).toBe(2); // both executors held greedy's processes
      for (const n of ok) for (const pid of sleepers(n)) process.kill(pid, 'SIGKILL');
      await eventually(async () => (await held('greedy')) === 0, 'the burst’s processes to return their shares');
    }, 120_000);

    test('a process that exits returns its share; a SIGKILLed executor’s leases lapse and its processes die with it', async () => {
      const greedy = stack.token('greedy2');
      // Short processes: each returns its share when it exits.
      const short = await Promise.all(Array.from({ length: BUDGET }, (_, i) => stack.call(greedy, 'start_process', { argv: ['sleep', '1'] }, { id: i })));
      expect(short.map(code)).toEqual(Array(BUDGET).fill('ok'));
      await eventually(async () => (await held('greedy2')) === 0, 'exited processes to return their shares');

      // Fill the budget again until one executor holds some of it; then SIGKILL that executor.
      const names = Array.from({ length: BUDGET }, () => sleeper());
      const answers = await Promise.all(names.map((n, i) => stack.call(greedy, 'start_process', { argv: ['sleep', n] }, { id: i })));
      expect(answers.map(code)).toEqual(Array(BUDGET).fill('ok'));
      const owners = names.map(ownerOf);
      const victim = owners[0]!;
      const victimService = stack.executors[victim]!;
      const onVictim = names.filter((_, i) => owners[i] === victim);
      const onSurvivor = names.length - onVictim.length;
      const t0 = Date.now();
      await stack.kill(victimService, 'SIGKILL');
      await eventually(async () => (await held('greedy2')) === onSurvivor, 'the killed executor’s leases to lapse', 30_000);
      const lapsedMs = Date.now() - t0;
      note(SET, `SIGKILLed executor held ${onVictim.length} of greedy's ${BUDGET}; its leases lapsed after ${lapsedMs} ms`);
      // Its sandboxes' processes died with it (bwrap --die-with-parent, a pid namespace each).
      const died = await eventually(() => onVictim.every((n) => sleepers(n).length === 0), 'the killed executor’s processes to die', 10_000).then(
        () => true,
        () => false,
      );
      tally.probe(SET, died, !died);
      expect(died).toBe(true);
      // The budget is there again, on the surviving executor: exactly the freed shares.
      const again = await Promise.all(onVictim.map((_, i) => stack.call(greedy, 'start_process', { argv: ['sleep', sleeper()] }, { id: i })));
      expect(again.map(code)).toEqual(Array(onVictim.length).fill('ok'));
      const over = await stack.call(greedy, 'start_process', { argv: ['sleep', sleeper()] });
      tally.probe(SET, code(over) === -32004, code(over) === 'ok');
      expect(limitOf(over)).toBe('processes');
    }, 120_000);
  });

  describe('live processes per identity: embedded serve (the count in memory)', () => {
    const SET = 'process-quota[embedded]';
    let stack: FaultStack;

    beforeAll(async () => {
      stack = await FaultStack.start({ sandbox: 'bwrap', env: ENV });
    }, 90_000);
    afterAll(async () => {
      await stack?.close();
    });

    /** Retries a start until it is accepted (a share comes back once the agent reports the end). */
    const startWhenFree = async (token: string, argv: string[]) => {
      let last: Answer | undefined;
      await eventually(
        async () => {
          last = await stack.call(token, 'start_process', { argv });
          return code(last) === 'ok';
        },
        `a share to come back (last answer: ${last ? describeAnswer(last) : 'none'})`,
      );
      return last!;
    };

    test('the budget caps start_process and run_command; kill_process and an exit return a share; another identity is served', async () => {
      const greedy = stack.token('greedy');
      const handles: string[] = [];
      for (let i = 0; i < BUDGET; i++) {
        const a = await stack.call(greedy, 'start_process', { argv: ['sleep', '600'] }, { id: i });
        expect(code(a)).toBe('ok');
        handles.push(resultOf(a).handle as string);
      }
      const probes = await Promise.all([
        stack.call(greedy, 'start_process', { argv: ['sleep', '600'] }, { id: 1 }),
        stack.call(greedy, 'start_process', { command: 'sh', pty: true }, { id: 2 }),
        stack.call(greedy, 'run_command', { command: 'sleep 600 &' }, { id: 3 }),
      ]);
      for (const a of probes) {
        tally.probe(SET, code(a) === -32004 && limitOf(a) === 'processes', code(a) === 'ok');
        expect(limitOf(a)).toBe('processes');
      }
      const quiet = stack.token('quiet');
      expect(code(await stack.call(quiet, 'start_process', { argv: ['sleep', '600'] }))).toBe('ok');
      expect(code(await stack.call(quiet, 'run_command', { argv: ['true'] }))).toBe('ok');

      // kill_process returns a share.
      expect(code(await stack.call(greedy, 'kill_process', { handle: handles[0] }))).toBe('ok');
      await startWhenFree(greedy, ['sleep', '1']);
      // …and that process exiting by itself returns it again.
      await startWhenFree(greedy, ['sleep', '600']);
      const over = await stack.call(greedy, 'start_process', { argv: ['sleep', '600'] });
      tally.probe(SET, code(over) === -32004, code(over) === 'ok');
      expect(limitOf(over)).toBe('processes');
    }, 120_000);
  });
});
