/** Chooses the bus: BullMQ when Redis is configured, else the in-process bus. */
import type { Config } from '../config';
import type { Logger } from '../log';
import type { Bus } from './bus';
import { InProcessBus } from './in-process';

export async function createBus(config: Readonly<Config>, log: Logger): Promise<Bus> {
  if (!config.redis) return new InProcessBus(log);
  // Loaded only when used: bullmq takes ~180 ms to require, which `stdio` and `serve` without
  // Redis should not pay at start-up.
  const { createBullMqBus } = await import('./bullmq');
  return createBullMqBus(config, log);
}
