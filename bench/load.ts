/**
 * `npm run load`: the proof that no reply is lost or crossed under load. 64 callers (each its
 * own keep-alive connection) through `toolgate serve` on BullMQ with two `toolgate executor`
 * processes, a bounded number of mixed tool calls (default 20,000), every call carrying a
 * unique value its reply must echo (bench/load/workload.ts). Afterwards the workspaces are read
 * back: every acknowledged write must be on disk exactly once, every command in its tenant's
 * ledger exactly once.
 *
 * `--faults`: the same load on Redis under Sentinel with executors that lease shards (one stands
 * by); during it the Redis master and then an executor holding a lease are SIGKILLed
 * (bench/load/faults.ts). Honest errors are expected then; lost, crossed and doubled calls are
 * not, and calls started after the recovery must succeed.
 *
 * Prints a summary, writes bench/results/load-<date>.json (load-faults-<date>.json) and exits 1
 * unless it passed (bench/load/report.ts says when). Loopback only; bounded in time: callers stop
 * starting calls after --max-seconds and every call has its own deadline, so the run always ends.
 */
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import { RssSampler } from './lib/rss';
import { parseArgs } from './load/args';
import { checkDisk, DiskCheck } from './load/check';
import { FaultDriver } from './load/faults';
import { passed, summary, writeJson } from './load/report';
import { RunResult, runLoad, warmUp } from './load/run';
import { startLoadStack } from './load/stack';

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const runId = randomBytes(3).toString('hex');
  const startedAt = new Date();
  const redis = args.faults ? 'a Sentinel group (2 redis-server, 3 redis-sentinel)' : 'redis-server';
  process.stderr.write(`load: starting ${redis}, toolgate serve and ${args.executors} toolgate executor(s) (sandbox ${args.sandbox}) on 127.0.0.1\n`);
  const stack = await startLoadStack({ executors: args.executors, tenants: args.tenants, sandbox: args.sandbox, faults: args.faults });
  // A run that cannot end by itself (it should always) is stopped: bounded in time whatever happens.
  const hardStop = setTimeout(
    () => {
      process.stderr.write('load: the run overran its time bound; stopping\n');
      void stack.close().finally(() => process.exit(2));
    },
    (args.maxSeconds + 120) * 1000 + args.callTimeoutMs * 2,
  );
  hardStop.unref();
  let result: RunResult;
  let disk: DiskCheck;
  const sampler = new RssSampler(
    new Map([
      ['gateway', () => [stack.gateway.pid]],
      ['executors', () => stack.executors.map((e) => e.pid)],
    ]),
    250,
  );
  const faults = args.faults ? new FaultDriver(stack, args.faults, args.calls) : undefined;
  try {
    await warmUp(stack, runId);
    process.stderr.write(`load: ${args.calls} calls from ${args.clients} callers over ${args.tenants} tenants…\n`);
    sampler.start();
    result = await runLoad(stack, args, runId, faults);
    sampler.stop();
    disk = await checkDisk(stack, result);
  } catch (err) {
    const logs = [stack.gateway, ...stack.executors].map((s) => `--- ${s.name}\n${s.stderr().trim()}`).join('\n');
    await stack.close();
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n${logs}`);
  }
  await stack.close();
  clearTimeout(hardStop);

  const report = {
    args,
    startedAt,
    result,
    disk,
    peakRssMiB: { gateway: sampler.peak('gateway'), executors: sampler.peak('executors') },
    ...(faults ? { faults: faults.timeline } : {}),
  };
  process.stdout.write(`${summary(report).join('\n')}\n`);
  if (args.write) {
    const file = await writeJson(report);
    process.stdout.write(`  wrote ${path.relative(process.cwd(), file) || file}\n`);
  }
  return passed(report) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`load: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  },
);
