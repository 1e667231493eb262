import Redis from 'ioredis';
import { createBus } from '../../shared/bus/index';
import { loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/log';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { busContract } from './bus.suite';

describeRedis('BullMQ bus on a real Redis', () => {
  let redis: TestRedis;
  let admin: Redis;
  const log = createLogger('silent');
  // Two shards, so calls of different tenants travel different queues.
  const create = () => createBus(loadConfig({ TOOLGATE_REDIS_URL: redis.url, TOOLGATE_SHARDS: '2' }), log);

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.close();
  });

  busContract('bullmq', { create, peer: create, reset: async () => void (await admin.flushall()) });
});
