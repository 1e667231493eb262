import Redis from 'ioredis';
import { createRedisQuotaStore } from '../../shared/quota/redis';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { processBudgetContract } from './process-budget.suite';

describeRedis('process budget on a real Redis', () => {
  let redis: TestRedis;
  let admin: Redis;
  const create = () => createRedisQuotaStore({ redis: redis.config });

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.close();
  });

  // Two stores on one Redis are two executor processes.
  processBudgetContract('redis', { create, peer: create, reset: async () => void (await admin.flushall()) });
});
