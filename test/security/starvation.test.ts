/**
 * Starvation, as a hostile tenant tried it: one identity fills every slot it may with sleeping
 * commands (more than it is allowed at once, too), and another identity's trivial calls must be
 * served promptly anyway — on real processes: `toolgate serve` with its executor embedded
 * (in-process bus), and `toolgate serve` + `toolgate executor` on a real Redis (BullMQ). Sandboxes
 * are bwrap: `none` serves one identity only, and this takes two.
 *
 * Each of the quiet tenant's calls is one probe: refused (contained) when it succeeded within
 * QUIET_BOUND_MS, leaked when it failed or took longer; so is each sample of the noisy tenant's
 * running commands (leaked if more run than its share, TOOLGATE_TENANT_CONCURRENCY). Before
 * fairness the quiet call waited for a sleep to end, or failed Unavailable after 30 s.
 *
 * A second case fills the pool with two tenants' work (each within its share) so that a third
 * tenant's call must wait past its start-by: it queues and is served, never failing Unavailable.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { Answer, eventually, FaultStack, killGroup, note, resultOf } from '../faults/stack';
import { tally } from './tally';

/** Generous for a 2-core machine under load; the attack it guards against took 30 s and more. */
const QUIET_BOUND_MS = 3000;
const QUIET_CALLS = 20;

/** Pids on this host whose command line contains `marker` (bwrap's commands are visible in the host's /proc). */
function pidsWith(marker: string): number[] {
  const pids: number[] = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readFileSync(`/proc/${p}/cmdline`, 'latin1').includes(marker)) pids.push(Number(p));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** A `sleep` whose command line is unique to this run (fractional seconds: GNU sleep takes them). */
function sleeper(seconds: number): { argv: string[]; marker: string } {
  const marker = `${seconds}.${process.pid}${randomBytes(3).readUIntBE(0, 3)}`;
  return { argv: ['sleep', marker], marker };
}

const ok = (a: Answer) => !('failure' in a) && !a.reply.error && a.reply.result?.isError !== true;

function starvationCases(bus: 'in-process' | 'bullmq', redis: () => TestRedis | undefined): void {
  const set = `starvation[${bus}]`;
  const markers: string[] = [];
  afterEach(() => {
    for (const m of markers.splice(0)) for (const pid of pidsWith(m)) killGroup(pid);
  });

  test('one identity saturating its limits with sleeps: another identity is served within the bound', async () => {
    const stack = await FaultStack.start({
      redis: redis(),
      sandbox: 'bwrap',
      // 8 slots → a share of 2 per identity (a quarter); 16 calls in flight per identity.
      env: { TOOLGATE_EXECUTOR_CONCURRENCY: '8', TOOLGATE_MAX_CONCURRENT_CALLS: '16', TOOLGATE_CALLS_PER_MINUTE: '600' },
    });
    try {
      const noisy = stack.token('noisy');
      const quiet = stack.token('quiet');
      expect(resultOf(await stack.call(quiet, 'write_file', { path: 'note.txt', content: 'hello' }))).toBeDefined();

      const { argv, marker } = sleeper(600);
      markers.push(marker);
      const flood = Array.from({ length: 24 }, (_, i) => stack.call(noisy, 'run_command', { argv, timeout_ms: 600_000 }, { id: i, timeoutMs: 120_000 }));
      const settled: Answer[] = [];
      flood.forEach((p) => void p.then((a) => settled.push(a)));
      // Its share runs; calls past its in-flight limit are refused; the rest wait their turn.
      await eventually(() => pidsWith(marker).length >= 2 && settled.length >= 8, 'the flood to fill its share', 30_000);
      expect(settled.every((a) => !('failure' in a) && a.reply.error?.code === -32004)).toBe(true);

      const latencies: number[] = [];
      for (let i = 0; i < QUIET_CALLS; i++) {
        const answer = i % 2 ? await stack.call(quiet, 'list_directory', { path: '.' }) : await stack.call(quiet, 'read_file', { path: 'note.txt' });
        latencies.push(answer.ms);
        const served = ok(answer) && answer.ms <= QUIET_BOUND_MS;
        tally.probe(set, served, !served);
        if (!served)
          throw new Error(`the quiet tenant's call ${i} was not served within ${QUIET_BOUND_MS} ms: ${JSON.stringify(answer).slice(0, 300)}\n${stack.logs()}`);
        const running = pidsWith(marker).length;
        tally.probe(set, running <= 2, running > 2);
        expect(running).toBeLessThanOrEqual(2);
      }
      // The noisy tenant's accepted calls are all still queued or running, none failed Unavailable.
      expect(settled.length).toBe(8);
      const sorted = [...latencies].sort((a, b) => a - b);
      note(
        set,
        `quiet tenant under a ${argv.join(' ')} flood: p50 ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} ms, max ${sorted[sorted.length - 1]!.toFixed(1)} ms over ${QUIET_CALLS} calls`,
      );
    } finally {
      await stack.close();
    }
  }, 120_000);

  test("a pool busy with other tenants' fair shares: a call waits past its start-by and is served, not Unavailable", async () => {
    const stack = await FaultStack.start({
      redis: redis(),
      sandbox: 'bwrap',
      env: { TOOLGATE_EXECUTOR_CONCURRENCY: '2', TOOLGATE_TENANT_CONCURRENCY: '1', TOOLGATE_QUEUE_TIMEOUT_MS: '1000' },
    });
    try {
      const { argv, marker } = sleeper(5);
      markers.push(marker);
      const busy = ['busy-1', 'busy-2'].map((id) => stack.call(stack.token(id), 'run_command', { argv }, { timeoutMs: 60_000 }));
      await eventually(() => pidsWith(marker).length === 2, 'both slots to be busy', 30_000);
      const answer = await stack.call(stack.token('late'), 'list_directory', { path: '.' }, { timeoutMs: 60_000 });
      const served = ok(answer);
      tally.probe(set, served, !served);
      if (!served) throw new Error(`the waiting call was not served: ${JSON.stringify(answer).slice(0, 300)}\n${stack.logs()}`);
      // It waited for a slot (longer than its 1 s start-by), and the busy tenants' calls completed.
      expect(answer.ms).toBeGreaterThan(1000);
      for (const a of await Promise.all(busy)) expect(resultOf(a).exitCode).toBe(0);
      note(set, `a call behind a full pool waited ${answer.ms.toFixed(0)} ms (start-by 1000 ms) and was served`);
    } finally {
      await stack.close();
    }
  }, 120_000);
}

const BWRAP = hasCommand('bwrap') && isRoot;
const NO_BWRAP = 'needs bubblewrap and root (two identities need a sandbox that separates them)';

describeIf(BWRAP, NO_BWRAP, 'starvation: in-process bus (toolgate serve, executor embedded)', () => {
  starvationCases('in-process', () => undefined);
});

describeIf(BWRAP, NO_BWRAP, 'starvation: BullMQ bus (toolgate serve + toolgate executor on Redis)', () => {
  describeRedis('on a real Redis', () => {
    let redis: TestRedis | undefined;
    beforeAll(async () => {
      redis = await startRedis();
    });
    afterAll(async () => {
      await redis?.close();
    });
    starvationCases('bullmq', () => redis);
  });
});
