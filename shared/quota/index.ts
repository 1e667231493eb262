/** Chooses the quota store: on Redis when Redis is configured (shared by every gateway), else in memory. */
import type { Config } from '../config';
import { MemoryQuotaStore } from './memory';
import type { QuotaStore } from './store';

export async function createQuotaStore(config: Readonly<Config>): Promise<QuotaStore> {
  if (!config.redis) return new MemoryQuotaStore();
  const { createRedisQuotaStore } = await import('./redis');
  return createRedisQuotaStore({ redis: config.redis });
}
