/**
 * noisy-neighbour: a quiet tenant's `read_file` (1 KiB, sequential) while another tenant
 * saturates every limit it has, against the same quiet calls on the idle server — in the same
 * run, alternating round by round (the noise is started before each noisy round, and stopped
 * and drained after it). On `toolgate serve` (in-process bus) and, where Redis runs, on
 * `toolgate serve` + `toolgate executor` over BullMQ, both with bwrap sandboxes (two tenants: `none`
 * serves one). Target: quiet p99 ≤ 3× idle.
 *
 * The noise, from its own process (bench/anchors/noisy-tenant.ts, at nice 19): NOISY_SLEEPERS callers each looping `run_command sleep
 * 0.5` — more than its in-flight limit (TOOLGATE_MAX_CONCURRENT_CALLS 16), so its bus share
 * (TOOLGATE_TENANT_CONCURRENCY, a quarter of the executor's 16 slots) is always full and the
 * rest wait for admission — plus NOISY_SPINNERS callers sending `list_directory` as fast as
 * they are answered, mostly refused at its in-flight limit (-32004), to load the gateway. Limits
 * are the product defaults except the per-minute budget, lifted so the quiet tenant can make its
 * measured calls (a noisy tenant at its per-minute limit is refused even sooner).
 */
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { closedLoop } from './lib/alternate';
import { canRunBwrap, canRunRedis } from './lib/availability';
import { rpcClient } from './lib/http-client';
import { sequential } from './lib/plan';
import { hasProduct, REPO_ROOT } from './lib/product';
import { baseEnv, startService } from './lib/services';
import { BenchRedis, startRedis } from './lib/redis';
import { summarize, Round } from './lib/stats';
import { startToolgate, ToolgateStack } from './lib/toolgate';
import type { Benchmark, BenchContext, Row } from './lib/types';

/** `TOOLGATE_BENCH_NOISY=SLEEPERS,SPINNERS` changes the noise (to see which part costs the quiet tenant what). */
const [NOISY_SLEEPERS, NOISY_SPINNERS] = (process.env.TOOLGATE_BENCH_NOISY ?? '24,2').split(',').map(Number) as [number, number];
/** Product defaults, stated so the bench does not drift if they change elsewhere. */
const LIMITS = {
  TOOLGATE_EXECUTOR_CONCURRENCY: '16',
  TOOLGATE_TENANT_CONCURRENCY: '4',
  TOOLGATE_MAX_CONCURRENT_CALLS: '16',
  TOOLGATE_CALLS_PER_MINUTE: '1000000',
};

const NOISY_TENANT = path.join(REPO_ROOT, 'dist-bench/bench/anchors/noisy-tenant.js');

interface Noise {
  stop(): Promise<{ served: number; refused: number }>;
}

/**
 * Starts the noisy tenant in its own process at the lowest CPU priority: it stands for a client
 * on another machine, so its own CPU use should not be what slows the quiet tenant down here.
 * Resolves once it has been sending for a moment (its first sleeps admitted and running).
 */
async function startNoise(stack: ToolgateStack): Promise<Noise> {
  const service = startService(
    'noisy tenant',
    '/usr/bin/nice',
    ['-n', '19', process.execPath, NOISY_TENANT, stack.url, stack.tokenFor('noisy'), String(NOISY_SLEEPERS), String(NOISY_SPINNERS)],
    baseEnv({}),
  );
  const until = Date.now() + 10_000;
  while (!service.stderr().includes('noisy tenant started')) {
    if (Date.now() > until) throw new Error(`the noisy tenant did not start: ${service.stderr()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 300));
  return {
    stop: async () => {
      process.kill(service.pid, 'SIGTERM');
      await service.exited;
      const m = /served (\d+) refused (\d+)/.exec(service.stderr());
      await service.stop();
      return { served: Number(m?.[1] ?? 0), refused: Number(m?.[2] ?? 0) };
    },
  };
}

async function measure(ctx: BenchContext, stack: ToolgateStack, label: string): Promise<Row> {
  // 10 rounds, not sequential's 20: every noisy round starts and stops the noise, and the
  // verdict is on pooled p99s, not on a median of round ratios.
  const plan = { ...sequential(ctx), rounds: ctx.quick ? 4 : 10 };
  const quiet = stack.client(1);
  const idle: Round[] = [];
  const noisy: Round[] = [];
  let noisyServed = 0;
  let noisyRefused = 0;
  const call = () => stack.readFile(quiet);
  try {
    // The noisy tenant's sandbox is started before measuring: its cold start is not the noise.
    const noisyClient = rpcClient(stack.url, { authorization: `Bearer ${stack.tokenFor('noisy')}` }, 1);
    await noisyClient.call('list_directory', { path: '.' }).finally(() => noisyClient.close());
    await closedLoop(call, plan.warmup, 1);
    const perRound = Math.max(1, Math.round(plan.calls / plan.rounds));
    for (let r = 0; r < plan.rounds; r++) {
      for (const withNoise of r % 2 ? [true, false] : [false, true]) {
        if (!withNoise) {
          idle.push(await closedLoop(call, perRound, 1));
          continue;
        }
        const noise = await startNoise(stack);
        const t0 = performance.now();
        noisy.push(await closedLoop(call, perRound, 1));
        ctx.log(`noisy-neighbour (${label}): round ${r + 1}: ${perRound} quiet calls in ${(performance.now() - t0).toFixed(0)} ms under noise`);
        const counts = await noise.stop();
        noisyServed += counts.served;
        noisyRefused += counts.refused;
      }
    }
  } finally {
    await quiet.close();
  }
  return {
    bench: 'noisy-neighbour',
    case: `quiet tenant read_file 1 KiB, sequential, ${label}`,
    ours: { label: `while another tenant saturates its limits [${label}]`, summary: summarize(noisy) },
    theirs: { label: 'same calls, idle server', summary: summarize(idle) },
    concurrency: 1,
    target: { metric: 'p99-ratio', op: '<=', value: 3 },
    note: `noisy tenant: ${NOISY_SLEEPERS} callers looping run_command sleep 0.5 (in-flight limit 16, bus share 4 of 16 slots) + ${NOISY_SPINNERS} callers spinning list_directory; it got ${noisyServed} calls through and ${noisyRefused} refused`,
  };
}

export const noisyNeighbourBench: Benchmark = {
  name: 'noisy-neighbour',
  title: "Noisy neighbour: a quiet tenant's read_file p50/p99 while another tenant saturates its limits, vs idle",
  async unavailable() {
    // Two identities: the `none` backend serves one only, so the tenants get bwrap sandboxes.
    const why = await canRunBwrap();
    return why ? `needs the bwrap backend (two tenants; none serves one): ${why}` : undefined;
  },
  async run(ctx: BenchContext): Promise<Row[]> {
    const rows: Row[] = [];
    const embedded = await startToolgate({ env: LIMITS, sandbox: 'bwrap' });
    try {
      rows.push(await measure(ctx, embedded, 'serve, in-process bus'));
    } finally {
      await embedded.close();
    }
    if (!hasProduct('shared/bus/bullmq') || canRunRedis()) {
      ctx.log(`noisy-neighbour: BullMQ case skipped: ${canRunRedis() ?? 'no BullMQ bus in this build'}`);
      return rows;
    }
    let redis: BenchRedis | undefined;
    let stack: ToolgateStack | undefined;
    try {
      redis = await startRedis();
      stack = await startToolgate({ redisUrl: redis.url, env: LIMITS, sandbox: 'bwrap' });
      rows.push(await measure(ctx, stack, 'serve + executor, BullMQ'));
    } finally {
      await stack?.close();
      await redis?.close();
    }
    return rows;
  },
};
