/**
 * memory: resident memory where the README's Performance targets set a bar. The gateway and the executor each under a
 * 64-caller read_file load on the Redis bus (peak, sampled every 100 ms), `toolgate serve` with
 * its embedded executor under the same load, and a sandbox agent idle (after a few calls, then
 * 1 s of nothing) per backend — beside the reference server-filesystem, idle after the same calls.
 */
import * as path from 'node:path';
import { closedLoop } from './lib/alternate';
import { loadMs } from './lib/plan';
import { canRunBwrap, canRunRedis } from './lib/availability';
import { DIR_100, FILE_1K, makeFixture, populate } from './lib/fixtures';
import { hasProduct } from './lib/product';
import { startRedis } from './lib/redis';
import { memoryBreakdownMiB, RssSampler, treeRssMiB } from './lib/rss';
import { agentPids, BackendName, echoHi, makeWorkspace, sandboxAgentPids, startSandbox } from './lib/sandbox';
import { dockerReason } from './lib/docker';
import { summarizeValues } from './lib/stats';
import { startToolgate, ToolgateStack } from './lib/toolgate';
import type { Benchmark, BenchContext, Row } from './lib/types';
import { startReference } from './stdio';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Drives 64 callers for `ms` while sampling each named process tree; returns the peaks (MiB). */
async function peaksUnderLoad(stack: ToolgateStack, ms: number, trees: Record<string, () => number[]>): Promise<Record<string, number>> {
  const client = stack.client(64);
  const sampler = new RssSampler(new Map(Object.entries(trees))).start();
  try {
    await closedLoop(() => stack.readFile(client), 640, 64); // warm-up
    const until = Date.now() + ms;
    while (Date.now() < until) await closedLoop(() => stack.readFile(client), 1280, 64);
  } finally {
    sampler.stop();
    await client.close();
  }
  return Object.fromEntries(Object.keys(trees).map((k) => [k, sampler.peak(k) ?? NaN]));
}

/** An agent's peak to subtract; none when the tools ran in process (sandbox none: no agent was ever sampled). */
const agentShare = (peak: number | undefined): number => (peak !== undefined && Number.isFinite(peak) ? peak : 0);

const memRow = (kase: string, label: string, mib: number, target?: number, theirs?: { label: string; mib: number }, note?: string): Row => ({
  bench: 'memory',
  case: kase,
  ours: { label, summary: summarizeValues([], mib) },
  ...(theirs ? { theirs: { label: theirs.label, summary: summarizeValues([], theirs.mib) } } : {}),
  concurrency: kase.includes('64 callers') ? 64 : 1,
  ...(target !== undefined ? { target: { metric: 'rss-mib' as const, op: '<=' as const, value: target } } : {}),
  ...(note ? { note } : {}),
});

export const memoryBench: Benchmark = {
  name: 'memory',
  title: 'memory: gateway and executor RSS under 64 callers; sandbox agent RSS idle',
  async unavailable() {
    return undefined;
  },
  async run(ctx: BenchContext): Promise<Row[]> {
    const rows: Row[] = [];

    // The reference server, idle after the same calls the agent gets.
    const fixture = await makeFixture();
    let referenceMiB = NaN;
    try {
      const ref = await startReference(fixture.root);
      try {
        for (let i = 0; i < 50; i++) {
          await ref.call('read_text_file', { path: path.join(fixture.root, FILE_1K) });
          await ref.call('list_directory', { path: path.join(fixture.root, DIR_100) });
        }
        await sleep(1000);
        referenceMiB = treeRssMiB(ref.pid);
      } finally {
        await ref.close();
      }
    } finally {
      await fixture.remove();
    }

    // Sandbox agents, idle.
    const backends: BackendName[] = ['none'];
    const bwrapWhy = await canRunBwrap();
    if (bwrapWhy) ctx.log(`memory: bwrap agent skipped: ${bwrapWhy}`);
    else backends.push('bwrap');
    const dockerWhy = await dockerReason(ctx);
    if (dockerWhy) ctx.log(`memory: docker agent skipped: ${dockerWhy}`);
    else backends.push('docker');
    for (const name of backends) {
      const ws = await makeWorkspace();
      try {
        await populate(ws.dir);
        const sandbox = await startSandbox(name, ws.dir);
        try {
          const never = new AbortController().signal;
          for (let i = 0; i < 50; i++) {
            await sandbox.call('read_file', { path: FILE_1K }, never);
            await sandbox.call('list_directory', { path: DIR_100 }, never);
            if (i % 10 === 0) await echoHi(sandbox);
          }
          await sleep(1000);
          // The agent's node process only (not bwrap's wrappers, not the container's init).
          const pids = await sandboxAgentPids(name);
          // No agent found is a broken measurement, not a small one.
          if (pids.length === 0) throw new Error(`memory: no ${name} sandbox agent process found to measure`);
          const mib = pids.reduce((sum, pid) => sum + treeRssMiB(pid), 0);
          const parts = pids.map(memoryBreakdownMiB);
          const sum = (k: 'anon' | 'file' | 'pss') => parts.reduce((t, p) => t + p[k], 0).toFixed(1);
          ctx.log(`memory: ${name} agent idle: ${mib.toFixed(1)} MiB`);
          rows.push(
            memRow(
              `sandbox agent idle [${name}]`,
              `sandbox agent (${name}), after 50 reads and lists, 1 s idle`,
              mib,
              50,
              { label: 'server-filesystem, idle after the same calls', mib: referenceMiB },
              `RSS = ${sum('anon')} MiB anonymous (its own) + ${sum('file')} MiB file-backed (the node binary and libraries, shared by every Node process on the host); PSS ${sum('pss')} MiB`,
            ),
          );
        } finally {
          await sandbox.stop();
        }
      } finally {
        await ws.remove();
      }
    }

    // toolgate serve with the embedded executor, under load.
    {
      const stack = await startToolgate();
      try {
        ctx.log(`memory: toolgate serve (embedded executor), 64 callers for ${loadMs(ctx)} ms`);
        const agents = () => agentPids(stack.gateway.pid);
        const peaks = await peaksUnderLoad(stack, loadMs(ctx), { serve: () => [stack.gateway.pid], agent: agents });
        const process = peaks.serve! - agentShare(peaks.agent);
        rows.push(
          memRow(
            'toolgate serve, embedded executor, 64 callers',
            'toolgate serve process (gateway + executor), without its agent',
            process,
            100,
            undefined,
            `with its sandbox agent: ${peaks.serve!.toFixed(1)} MiB`,
          ),
        );
      } finally {
        await stack.close();
      }
    }

    // Gateway and executor as separate processes on Redis, under load.
    const redisWhy = !hasProduct('shared/bus/bullmq') ? 'the BullMQ bus is not in this build' : canRunRedis();
    if (redisWhy) {
      ctx.log(`memory: gateway/executor on Redis skipped: ${redisWhy}`);
      return rows;
    }
    const redis = await startRedis();
    try {
      const stack = await startToolgate({ redisUrl: redis.url });
      try {
        ctx.log(`memory: gateway + executor on Redis, 64 callers for ${loadMs(ctx)} ms`);
        const executor = stack.executors[0]!;
        const peaks = await peaksUnderLoad(stack, loadMs(ctx), {
          gateway: () => [stack.gateway.pid],
          executor: () => [executor.pid],
          agent: () => agentPids(executor.pid),
          redis: () => [redis.service.pid],
        });
        rows.push(memRow('gateway on Redis, 64 callers', 'toolgate serve (gateway only)', peaks.gateway!, 100));
        rows.push(
          memRow(
            'executor on Redis, 64 callers',
            'toolgate executor, without its agent',
            peaks.executor! - agentShare(peaks.agent),
            undefined,
            undefined,
            `with its sandbox agent: ${peaks.executor!.toFixed(1)} MiB; redis-server: ${peaks.redis!.toFixed(1)} MiB`,
          ),
        );
      } finally {
        await stack.close();
      }
    } finally {
      await redis.close();
    }
    return rows;
  },
};
