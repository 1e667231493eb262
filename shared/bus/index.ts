/** Chooses the bus: BullMQ when TOOLGATE_REDIS_URL is set, else the in-process bus. */
import type { Config } from '../config';
import type { Logger } from '../log';
import type { Bus } from './bus';
import { InProcessBus } from './in-process';

export async function createBus(config: Readonly<Config>, _log: Logger): Promise<Bus> {
  if (!config.bus.redisUrl) return new InProcessBus();
  throw new Error('the BullMQ bus is not built yet');
}
