/**
 * toolgate's own Bus from the built product, for the bus-only comparison: `Bus.call` here, a
 * consumer with a trivial handler in another process (anchors/bus-consumer.ts).
 */
import type * as BusIndex from '../../shared/bus/index';
import type { Bus, ToolCallJob } from '../../shared/bus/bus';
import type * as ConfigModule from '../../shared/config';
import type * as LogModule from '../../shared/log';
import { productModule } from './product';

export async function productBus(redisUrl: string): Promise<Bus> {
  const { createBus } = productModule<typeof BusIndex>('shared/bus/index');
  const { loadConfig } = productModule<typeof ConfigModule>('shared/config');
  const { createLogger } = productModule<typeof LogModule>('shared/log');
  return createBus(loadConfig({ TOOLGATE_REDIS_URL: redisUrl }), createLogger('silent'));
}

const NEVER = new AbortController().signal;
let n = 0;

/** One trivial call through the bus, as the gateway's BusToolRunner makes it. */
export function busCall(bus: Bus): Promise<unknown> {
  const now = Date.now();
  const job: ToolCallJob = {
    id: `bench-${process.pid}-${++n}`,
    tenant: 'bench',
    permissions: ['file:read'],
    tool: 'read_file',
    args: { path: 'x' },
    deadline: now + 30_000,
    startBy: now + 30_000,
  };
  return bus.call(job, NEVER);
}
