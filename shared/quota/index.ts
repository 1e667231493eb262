/** Chooses the quota store: on Redis when TOOLGATE_REDIS_URL is set (shared by every gateway), else in memory. */
import type { Config } from '../config';
import { MemoryQuotaStore } from './memory';
import type { QuotaStore } from './store';

export async function createQuotaStore(config: Readonly<Config>): Promise<QuotaStore> {
  if (!config.bus.redisUrl) return new MemoryQuotaStore();
  const { createRedisQuotaStore } = await import('./redis');
  return createRedisQuotaStore({ url: config.bus.redisUrl });
}
