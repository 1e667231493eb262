/**
 * `node dist-bench/bench/ab-http.js BASE NEW [--bus embedded|bullmq] [--callers N] [--rounds R] [--calls N]`:
 * A/B of two checkouts on the HTTP path, where the full bench compares each against a bare anchor
 * and a faster or slower anchor run moves the ratio. BASE and NEW are two checkouts' roots, each
 * with its built `dist/` and `dist-bench/`; each tree's own bench library starts its own `toolgate
 * serve` (embedded executor, sandbox none; with `--bus bullmq` a gateway and one executor, each
 * tree on a Redis of its own, started alike), and the two are driven in alternating rounds of
 * `read_file` 1 KiB with N callers (default 64). The verdict is the median of the per-round
 * ratios NEW ÷ BASE of calls/s and of p50; an A/A run (the same tree twice) shows the noise.
 */
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { alternate } from './lib/alternate';
import { BenchRedis, startRedis } from './lib/redis';
import { median } from './lib/stats';
import type * as Toolgate from './lib/toolgate';

const USAGE = 'Usage: node dist-bench/bench/ab-http.js BASE NEW [--bus embedded|bullmq] [--callers N] [--rounds R] [--calls N]';

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      bus: { type: 'string', default: 'embedded' },
      callers: { type: 'string', default: '64' },
      rounds: { type: 'string', default: '20' },
      calls: { type: 'string', default: '40000' },
    },
  });
  if (positionals.length !== 2 || (values.bus !== 'embedded' && values.bus !== 'bullmq')) throw new Error(USAGE);
  const callers = Number(values.callers);
  const rounds = Number(values.rounds);
  const trees = positionals.map((t) => path.resolve(t));
  const redis: BenchRedis[] = [];
  const stacks: Toolgate.ToolgateStack[] = [];
  try {
    for (const [i, tree] of trees.entries()) {
      // Each tree's own bench library, so each starts its own build the way its bench does.
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- a tree chosen at run time
      const lib = require(path.join(tree, 'dist-bench/bench/lib/toolgate.js')) as typeof Toolgate;
      if (values.bus === 'bullmq') redis.push(await startRedis());
      stacks.push(await lib.startToolgate(redis[i] ? { redisUrl: redis[i].url } : {}));
    }
    const clients = stacks.map((s) => s.client(callers));
    const results = await alternate(
      stacks.map((s, i) => ({ label: trees[i]!, call: () => s.readFile(clients[i]!), pids: () => [s.gateway.pid, ...s.executors.map((e) => e.pid)] })),
      { warmup: 2000, calls: Number(values.calls), rounds, concurrency: callers },
    );
    const [base, next] = [results[0]!, results[1]!];
    const ratio = (a: readonly number[], b: readonly number[]) => median(b.map((x, i) => x / a[i]!));
    console.log(`${values.bus} bus, ${callers} callers, ${rounds} rounds of ${Math.round(Number(values.calls) / rounds)} calls per side`);
    for (const [name, s] of [
      ['BASE', base],
      ['NEW ', next],
    ] as const) {
      console.log(`${name} p50 ${s.p50?.toFixed(2)} ms, ${s.callsPerSec?.toFixed(0)} calls/s, CPU ${s.cpuUsPerCall?.toFixed(0)} µs/call`);
    }
    console.log(
      `NEW ÷ BASE: calls/s ${ratio(base.roundCallsPerSec ?? [], next.roundCallsPerSec ?? []).toFixed(3)}, p50 ${ratio(base.roundP50 ?? [], next.roundP50 ?? []).toFixed(3)} (median of round ratios)`,
    );
    for (const c of clients) await c.close();
  } finally {
    for (const s of stacks) await s.close();
    for (const r of redis) await r.close();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
