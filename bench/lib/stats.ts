/** Percentiles and summaries. Latencies are in milliseconds. */
import type { Summary } from './types';

/** One round of calls for one side: each call's latency and the wall time the round took. */
export interface Round {
  latencies: number[];
  wallMs: number;
  errors: number;
}

const SAMPLE_SIZE = 400;

/** Linear-interpolated percentile of an ascending array (q in 0..1). */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo]!;
  const b = sorted[hi]!;
  return a + (b - a) * (pos - lo);
}

export function median(values: readonly number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    0.5,
  );
}

/** An evenly spaced pick of a sorted array: enough for a distribution chart, small in JSON. */
function thin(sorted: readonly number[], size: number): number[] {
  if (sorted.length <= size) return [...sorted];
  const out: number[] = [];
  for (let i = 0; i < size; i++) out.push(sorted[Math.round((i * (sorted.length - 1)) / (size - 1))]!);
  return out;
}

/**
 * Pools every round's latencies for the percentiles; throughput is the median of the rounds'
 * own rates, so one round slowed by a neighbour's test run does not decide it.
 */
export function summarize(rounds: readonly Round[], peakRssMiB?: number): Summary {
  const all = rounds.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const mean = all.length ? all.reduce((s, v) => s + v, 0) / all.length : NaN;
  const summary: Summary = {
    n: all.length,
    p50: percentile(all, 0.5),
    p90: percentile(all, 0.9),
    p99: percentile(all, 0.99),
    mean,
    min: all[0] ?? NaN,
    max: all[all.length - 1] ?? NaN,
    callsPerSec: median(rounds.map((r) => (r.wallMs > 0 ? (r.latencies.length * 1000) / r.wallMs : 0))),
    roundP50: rounds.map((r) =>
      percentile(
        [...r.latencies].sort((a, b) => a - b),
        0.5,
      ),
    ),
    roundCallsPerSec: rounds.map((r) => (r.wallMs > 0 ? (r.latencies.length * 1000) / r.wallMs : 0)),
    sample: thin(all, SAMPLE_SIZE),
    errors: rounds.reduce((s, r) => s + r.errors, 0),
  };
  if (peakRssMiB !== undefined) summary.peakRssMiB = peakRssMiB;
  return summary;
}

/** A one-off figure (a cold start, an idle RSS) as a summary, so every row has one shape. */
export function summarizeValues(values: readonly number[], peakRssMiB?: number): Summary {
  return summarize([{ latencies: [...values], wallMs: 0, errors: 0 }], peakRssMiB);
}
