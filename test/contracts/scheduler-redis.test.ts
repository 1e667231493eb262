import Redis from 'ioredis';
import { createRedisQuotaStore } from '../../shared/quota/redis';
import type { QuotaStore } from '../../shared/quota/store';
import { LeaseScheduler } from '../../gateway/scheduling/lease-scheduler';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { schedulerContract } from './scheduler.suite';

describeRedis('scheduler on a real Redis', () => {
  let redis: TestRedis;
  let admin: Redis;
  const stores: QuotaStore[] = [];
  // Each scheduler has its own store (its own connections), as each gateway process would.
  const create = async (perTenant: number) => {
    const store = await createRedisQuotaStore({ redis: redis.config });
    stores.push(store);
    return new LeaseScheduler({ store, perTenant });
  };

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.close();
  });

  schedulerContract('redis', {
    create,
    peer: create,
    reset: async () => {
      for (const s of stores.splice(0)) await s.close();
      await admin.flushall();
    },
  });
});
