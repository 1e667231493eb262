/** How many calls each kind of measurement makes, full and --quick, in one place. */
import type { AlternateOptions } from './alternate';
import type { BenchContext } from './types';

/**
 * One caller, many short calls (stdio, sequential HTTP). Full: 1,000 warm-up calls, then 2,000
 * calls per side in 20 rounds of 100.
 * - Warm-up: a Node server's per-call code is still being optimized by V8 for its first ~1,000
 *   calls: with 200 warm-up calls, toolgate stdio's p50 fell by a quarter over the first three
 *   measured rounds and then held (bench/results/2026-11-24-bullmq-3.md), so the verdict mixed
 *   tier-up with the steady state it is about.
 * - Rounds: on these 2-vCPU VMs a ping-pong of short calls runs in one of two modes that hold for
 *   a round and flip between rounds (a round's p50 is ~185 µs or ~320 µs for the same stdio
 *   server), so the per-round ratios spread widely. Their median over 10 rounds moved by ±0.05
 *   from run to run; over 20 rounds of the same 2,000 calls it is twice as many samples of that
 *   flip (bench/results/2026-11-24-stdio-rounds.md).
 */
export const sequential = (ctx: BenchContext): AlternateOptions =>
  ctx.quick ? { warmup: 300, calls: 400, rounds: 4, concurrency: 1 } : { warmup: 1000, calls: 2000, rounds: 20, concurrency: 1 };

/** N callers at once. Full: 20,000 calls per side in 10 rounds. */
export const concurrent = (ctx: BenchContext, callers: number): AlternateOptions =>
  ctx.quick ? { warmup: 10 * callers, calls: 3000, rounds: 3, concurrency: callers } : { warmup: 10 * callers, calls: 20000, rounds: 10, concurrency: callers };

/** Calls that spawn a process (a few ms each). */
export const spawning = (ctx: BenchContext): AlternateOptions =>
  ctx.quick ? { warmup: 20, calls: 150, rounds: 3, concurrency: 1 } : { warmup: 50, calls: 1000, rounds: 10, concurrency: 1 };

/** Cold starts (hundreds of ms each, plus an untimed stop). */
export const coldStarts = (ctx: BenchContext): AlternateOptions =>
  ctx.quick ? { warmup: 1, calls: 4, rounds: 2, concurrency: 1, pauseMs: 100 } : { warmup: 1, calls: 20, rounds: 5, concurrency: 1, pauseMs: 100 };

/** How long the memory benchmark holds its 64-caller load. */
export const loadMs = (ctx: BenchContext): number => (ctx.quick ? 2000 : 10_000);

/** Warm calls paired with `docker exec` (about 60–100 ms each): fewer, so the anchor does not take minutes. */
export const dockerExecPaired = (ctx: BenchContext): AlternateOptions =>
  ctx.quick ? { warmup: 5, calls: 60, rounds: 3, concurrency: 1 } : { warmup: 10, calls: 300, rounds: 10, concurrency: 1 };
