/** Every benchmark, in the order they run. */
import type { Benchmark } from './lib/types';
import { stdioBench } from './stdio';
import { stdioBreakdownBench } from './stdio-breakdown';
import { sandboxesBench } from './sandboxes';
import { httpEmbeddedBench } from './http-embedded';
import { httpOAuthBench } from './http-oauth';
import { bullmqBench } from './bullmq';
import { memoryBench } from './memory';
import { noisyNeighbourBench } from './noisy-neighbour';
import { egressBench } from './egress';

export const BENCHMARKS: readonly Benchmark[] = [
  stdioBench,
  stdioBreakdownBench,
  httpEmbeddedBench,
  httpOAuthBench,
  bullmqBench,
  sandboxesBench,
  memoryBench,
  noisyNeighbourBench,
  egressBench,
];
