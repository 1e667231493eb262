/**
 * Runs our path and its anchor in the same run, alternating round by round (ours first in even
 * rounds, theirs first in odd ones), so a neighbour's burst of CPU lands on both sides alike.
 * Each round is a closed loop: `concurrency` callers, each starting its next call as soon as its
 * last one returns, until the round's calls are done.
 */
import { performance } from 'node:perf_hooks';
import { RssSampler, SchedTotals, treeSched } from './rss';
import { Round, summarize } from './stats';
import type { Summary } from './types';

/** A call may time itself (a cold start that must be stopped afterwards, untimed). */
export interface Measured {
  measuredMs: number;
}

const isMeasured = (v: unknown): v is Measured => typeof v === 'object' && v !== null && typeof (v as Measured).measuredMs === 'number';

export interface Side {
  label: string;
  /** One call; throws (or rejects) when it failed. Resolving to `{ measuredMs }` records that instead of the call's wall time. */
  call(): Promise<unknown>;
  /** Process trees whose memory and CPU belong to this side (empty: not observable). */
  pids?(): number[];
  /** Process trees shared by both sides (a Redis): their CPU during this side's rounds counts for it; their memory does not. */
  cpuPids?(): number[];
}

export interface AlternateOptions {
  warmup: number;
  /** Calls measured per side, spread evenly over the rounds. */
  calls: number;
  rounds: number;
  concurrency: number;
  /** Idle time between rounds, to let the machine settle (default 50 ms). */
  pauseMs?: number;
}

/** Runs `calls` calls with `concurrency` callers and times each. */
export async function closedLoop(call: () => Promise<unknown>, calls: number, concurrency: number): Promise<Round> {
  const latencies: number[] = [];
  let errors = 0;
  let next = 0;
  let firstError: unknown;
  const worker = async () => {
    while (next < calls) {
      next++;
      const t0 = performance.now();
      try {
        const r = await call();
        latencies.push(isMeasured(r) ? r.measuredMs : performance.now() - t0);
      } catch (err) {
        errors++;
        firstError ??= err;
      }
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: Math.min(concurrency, calls) }, worker));
  const wallMs = performance.now() - t0;
  if (errors > 0 && latencies.length === 0) throw firstError instanceof Error ? firstError : new Error(String(firstError));
  return { latencies, wallMs, errors };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function alternate(sides: readonly Side[], options: AlternateOptions): Promise<Summary[]> {
  const sampler = new RssSampler(new Map(sides.map((s, i) => [String(i), () => s.pids?.() ?? []]))).start();
  try {
    for (const side of sides) await closedLoop(() => side.call(), options.warmup, options.concurrency);
    const perRound = Math.max(1, Math.round(options.calls / options.rounds));
    const rounds: Round[][] = sides.map(() => []);
    const sched: SchedTotals[] = sides.map(() => ({ cpuNs: 0, runDelayNs: 0 }));
    for (let r = 0; r < options.rounds; r++) {
      const order = sides.map((_, i) => i);
      if (r % 2 === 1) order.reverse();
      for (const i of order) {
        const before = schedOf(sides[i]!);
        rounds[i]!.push(await closedLoop(() => sides[i]!.call(), perRound, options.concurrency));
        const after = schedOf(sides[i]!);
        sched[i]!.cpuNs += after.cpuNs - before.cpuNs;
        sched[i]!.runDelayNs += after.runDelayNs - before.runDelayNs;
        await sleep(options.pauseMs ?? 50);
      }
    }
    sampler.stop();
    return sides.map((s, i) => {
      const summary = summarize(rounds[i]!, s.pids ? sampler.peak(String(i)) : undefined);
      const pids = s.pids?.() ?? [];
      if (pids.length > 0 && summary.n > 0) {
        summary.cpuUsPerCall = sched[i]!.cpuNs / 1000 / summary.n;
        summary.runDelayUsPerCall = sched[i]!.runDelayNs / 1000 / summary.n;
      }
      return summary;
    });
  } finally {
    sampler.stop();
  }
}

function schedOf(side: Side): SchedTotals {
  const total: SchedTotals = { cpuNs: 0, runDelayNs: 0 };
  for (const pid of [...(side.pids?.() ?? []), ...(side.cpuPids?.() ?? [])]) {
    const t = treeSched(pid);
    total.cpuNs += t.cpuNs;
    total.runDelayNs += t.runDelayNs;
  }
  return total;
}
