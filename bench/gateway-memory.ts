/**
 * `node dist-bench/bench/gateway-memory.js [--embedded] [--everywhere] [--rounds R] [--calls N]
 * [--callers C] [--variants 'A|B|…']`: the gateway's memory against its CPU, for node flag
 * settings side by side (with --everywhere the executor gets them too, and its CPU is shown).
 * Each variant is a stack of its own (`toolgate serve` with those node flags, on a private Redis
 * with one `toolgate executor`; or `toolgate serve` embedded with --embedded), all started first
 * and then driven in alternating rounds of N calls from C callers (order reversed every other
 * round), so the machine's load falls on every variant alike. Per variant: RSS at rest (after
 * start-up and one call, then 2 s idle), peak RSS over all its rounds (sampled every 100 ms),
 * and the median over rounds of the gateway's CPU µs per call and calls/s.
 * A variant is a space-separated list of node flags added after serve's deployed ones
 * (bin/node-flags.ts); `default` (or empty) adds none; `bare` starts serve without the deployed
 * ones too, as `node dist/bin/toolgate.js serve` does (`bare FLAGS`: only FLAGS); `bin` installs the
 * package globally from `npm pack` (bench/lib/global-install.ts) and starts serve by executing its
 * bin, as a user's shell does (its `#!` line decides node's flags). V8's own defaults on this Node:
 * `--max-semi-space-size=16 --heap-growing-percent=0`. Peak RSS is the launched process's whole
 * tree; the table's last column is that process's command line as /proc shows it.
 */
import { readFileSync } from 'node:fs';
import { GlobalInstall, installGlobally } from './lib/global-install';
import { startRedis, BenchRedis } from './lib/redis';
import { memoryBreakdownMiB, RssSampler, sched } from './lib/rss';
import { startToolgate, ToolgateStack } from './lib/toolgate';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : process.argv[i + 1]!;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Variant {
  label: string;
  flags: string[];
  redis?: BenchRedis;
  stack?: ToolgateStack;
  rest?: ReturnType<typeof memoryBreakdownMiB>;
  peak: number;
  cpu: number[];
  execCpu: number[];
  rate: number[];
  cmdline?: string;
}

async function main(): Promise<void> {
  const embedded = process.argv.includes('--embedded');
  const everywhere = process.argv.includes('--everywhere');
  const rounds = Number(arg('rounds', '6'));
  const calls = Number(arg('calls', '3000'));
  const callers = Number(arg('callers', '64'));
  const variants: Variant[] = arg('variants', 'default')
    .split('|')
    .map((v) => v.trim())
    .map((label) => ({
      label: label || 'default',
      flags: label === 'default' || label === 'bin' ? [] : label.split(' ').filter((f) => f && f !== 'bare'),
      peak: 0,
      cpu: [],
      execCpu: [],
      rate: [],
    }));
  const installed: GlobalInstall | undefined = variants.some((v) => v.label === 'bin') ? await installGlobally() : undefined;
  try {
    for (const v of variants) {
      if (!embedded) v.redis = await startRedis();
      // TOOLGATE_BENCH_NODE_FLAGS reach every toolgate process (and win over the bin's own).
      if (everywhere) process.env.TOOLGATE_BENCH_NODE_FLAGS = v.flags.join(' ');
      v.stack = await startToolgate({
        ...(v.redis ? { redisUrl: v.redis.url } : {}),
        ...(everywhere ? {} : { gatewayNodeFlags: v.flags }),
        bareGateway: v.label.split(' ')[0] === 'bare',
        ...(v.label === 'bin' ? { gatewayBin: installed!.bin('toolgate') } : {}),
      });
      v.cmdline = readFileSync(`/proc/${v.stack.gateway.pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
      delete process.env.TOOLGATE_BENCH_NODE_FLAGS;
    }
    await sleep(2000);
    for (const v of variants) v.rest = memoryBreakdownMiB(v.stack!.gateway.pid);
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? variants : [...variants].reverse();
      for (const v of order) {
        const stack = v.stack!;
        const pid = stack.gateway.pid;
        const client = stack.client(callers);
        const sampler = new RssSampler(new Map([['g', () => [pid]]])).start();
        const exec = stack.executors.map((e) => e.pid);
        const before = sched([pid]).cpuNs;
        const execBefore = sched(exec).cpuNs;
        const t0 = process.hrtime.bigint();
        let next = 0;
        await Promise.all(
          Array.from({ length: callers }, async () => {
            while (next++ < calls) await stack.readFile(client);
          }),
        );
        const wallS = Number(process.hrtime.bigint() - t0) / 1e9;
        const cpuUs = (sched([pid]).cpuNs - before) / 1000 / calls;
        const execUs = (sched(exec).cpuNs - execBefore) / 1000 / calls;
        sampler.stop();
        await client.close();
        const peak = sampler.peak('g') ?? NaN;
        if (r > 0) {
          // round 0 warms every variant up (V8 compiles the path); its CPU is not counted
          v.cpu.push(cpuUs);
          v.execCpu.push(execUs);
          v.rate.push(calls / wallS);
        }
        v.peak = Math.max(v.peak, peak);
        console.log(
          `round ${r + 1} ${v.label}: ${(calls / wallS).toFixed(0)} calls/s, gateway ${cpuUs.toFixed(0)} µs/call, executor ${execUs.toFixed(0)} µs/call, peak ${peak.toFixed(1)} MiB`,
        );
      }
    }
    console.log(
      `\n${embedded ? 'toolgate serve, embedded executor (sandbox none)' : 'gateway on Redis'}, ${callers} callers, ${rounds} rounds of ${calls} calls (first is warm-up for CPU)`,
    );
    console.log(
      `| ${everywhere ? 'node flags (gateway and executor)' : 'gateway node flags'} | at rest RSS (anon / file) | peak RSS | gateway CPU µs/call (median) | executor CPU µs/call | calls/s (median) | serve's command line |`,
    );
    console.log('|---|---|---|---|---|---|---|');
    for (const v of variants) {
      const rest = v.rest!;
      console.log(
        `| ${v.label} | ${rest.rss.toFixed(1)} (${rest.anon.toFixed(1)} / ${rest.file.toFixed(1)}) | ${v.peak.toFixed(1)} | ${med(v.cpu).toFixed(0)} | ${v.execCpu.length && !embedded ? med(v.execCpu).toFixed(0) : '—'} | ${med(v.rate).toFixed(0)} | \`${v.cmdline}\` |`,
      );
    }
  } finally {
    for (const v of variants) {
      await v.stack?.close();
      await v.redis?.close();
    }
    await installed?.remove();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
