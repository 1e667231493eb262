/**
 * `node dist-bench/bench/profile-bullmq.js [--calls N] [--rounds R] [--callers C] [--prof DIR]`:
 * CPU µs per call of each process on the hosted path (gateway, executor, its agent, redis-server)
 * under C concurrent callers (default 64) of `read_file` 1 KiB, from the scheduler's accounting
 * of each process (all threads), so the figure barely moves with the machine's load. With --prof,
 * the gateway and executor run under node --cpu-prof (written to DIR when they stop).
 */
import { readProfile } from './lib/cpuprofile';
import { REPO_ROOT } from './lib/product';
import { startRedis } from './lib/redis';
import { childrenMap, processTree, sched } from './lib/rss';
import { startToolgate } from './lib/toolgate';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : process.argv[i + 1]!;
}

async function main(): Promise<void> {
  const calls = Number(arg('calls', '2000'));
  const rounds = Number(arg('rounds', '3'));
  const callers = Number(arg('callers', '64'));
  const prof = arg('prof', '');
  if (prof) process.env.TOOLGATE_BENCH_NODE_FLAGS = `--cpu-prof --cpu-prof-interval 200 --cpu-prof-dir ${prof}`;
  const redis = await startRedis();
  const stack = await startToolgate({ redisUrl: redis.url });
  const client = stack.client(callers);
  const pids = () => {
    const children = childrenMap();
    const exec = stack.executors[0]!.pid;
    return {
      gateway: [stack.gateway.pid],
      executor: [exec],
      agent: processTree(exec, children).filter((p) => p !== exec),
      redis: [redis.service.pid],
    };
  };
  const run = async (n: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        while (next++ < n) await stack.readFile(client);
      }),
    );
  };
  await run(500); // warm-up
  const totals: Record<string, number[]> = {};
  for (let r = 0; r < rounds; r++) {
    const p = pids();
    const before = Object.fromEntries(Object.entries(p).map(([k, v]) => [k, sched(v).cpuNs]));
    const t0 = process.hrtime.bigint();
    await run(calls);
    const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
    const line: string[] = [];
    let sum = 0;
    for (const [k, v] of Object.entries(p)) {
      const us = (sched(v).cpuNs - before[k]!) / 1000 / calls;
      sum += us;
      (totals[k] ??= []).push(us);
      line.push(`${k} ${us.toFixed(0)}`);
    }
    (totals.total ??= []).push(sum);
    console.log(`round ${r + 1}: ${(calls / (wallUs / 1e6)).toFixed(0)} calls/s; CPU µs/call: ${line.join(', ')}, total ${sum.toFixed(0)}`);
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(
    `median CPU µs/call: ${Object.entries(totals)
      .map(([k, v]) => `${k} ${med(v).toFixed(0)}`)
      .join(', ')}`,
  );
  await client.close();
  await stack.close();
  await redis.close();
  if (prof) {
    const { readdirSync } = await import('node:fs');
    for (const f of readdirSync(prof).filter((x) => x.endsWith('.cpuprofile'))) {
      const s = readProfile(`${prof}/${f}`, REPO_ROOT);
      console.log(`${f}: busy ${s.busyMs.toFixed(0)} ms, gc ${s.gcMs.toFixed(0)} ms`);
    }
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
