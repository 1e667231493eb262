/**
 * The shapes every benchmark shares: a benchmark produces rows, each row compares our path with
 * its anchor measured in the same run, and carries the target it is judged against.
 */

/** What one side of a comparison measured, pooled over every round. */
export interface Summary {
  /** Calls measured (warm-up excluded). */
  n: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
  /** Median over rounds of calls completed per second of wall time. */
  callsPerSec: number;
  /** Peak resident set of the side's process tree, sampled while it ran (MiB); undefined when not observable. */
  peakRssMiB?: number;
  /** CPU time of the side's process tree per call (µs), all threads; undefined when not observable. */
  cpuUsPerCall?: number;
  /** Time the side's threads were runnable but waiting for a CPU, per call (µs): what a loaded machine adds. */
  runDelayUsPerCall?: number;
  /** Per-round p50 (ms), in round order, to show drift under a noisy machine. */
  roundP50: number[];
  /** Per-round calls per second, in round order. */
  roundCallsPerSec: number[];
  /** A bounded, sorted sample of latencies (ms) for the chart. */
  sample: number[];
  /** Errors seen (a call that failed or returned isError unexpectedly). */
  errors: number;
}

/** `p50-added-ms`: what ours adds to theirs, the median over rounds of the two round p50s' difference. */
export type TargetMetric = 'p50-ratio' | 'p99-ratio' | 'throughput-ratio' | 'p50-ms' | 'p50-added-ms' | 'rss-mib';

export interface Target {
  metric: TargetMetric;
  /** `<=` for latency, ratio of latencies and memory; `>=` for throughput ratios. */
  op: '<=' | '>=';
  value: number;
  /**
   * What the figure was, and whether it met the target. Ratios are judged on the median of the
   * per-round ratios (each round pairs ours with theirs run back to back), so a drift in the
   * machine's load over the run cancels out; the pooled ratio is shown beside it.
   */
  actual?: number;
  met?: boolean;
  /** How `actual` was obtained, for the report. */
  basis?: string;
}

export interface Row {
  bench: string;
  case: string;
  ours: { label: string; summary: Summary };
  /** Absent for rows with no anchor (a plain measurement, e.g. idle memory). */
  theirs?: { label: string; summary: Summary };
  /** Whether calls ran one at a time or from N concurrent callers. */
  concurrency: number;
  target?: Target;
  note?: string;
}

/** Handed to every benchmark. */
export interface BenchContext {
  quick: boolean;
  /** Where the built product lives (dist/). */
  dist: string;
  /** The repository root. */
  root: string;
  log(line: string): void;
}

export interface Benchmark {
  name: string;
  title: string;
  /** Undefined when it can run here; otherwise the reason it is skipped. */
  unavailable(ctx: BenchContext): Promise<string | undefined>;
  run(ctx: BenchContext): Promise<Row[]>;
}

export interface Skipped {
  bench: string;
  reason: string;
}
