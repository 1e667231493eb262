/** The task store contract on a real Redis, with a second connection standing in for another process. */
import Redis from 'ioredis';
import { RedisTaskStore } from '../../shared/tasks/redis-store';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { taskStoreContract } from './task-store.suite';

describeRedis('task store on a real Redis', () => {
  let redis: TestRedis;
  const connections: Redis[] = [];
  const connect = async () => {
    const c = new Redis(redis.url);
    connections.push(c);
    return new RedisTaskStore(c);
  };
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const c of connections) c.disconnect();
    await redis?.close();
  });

  taskStoreContract('redis', { create: connect, peer: connect });
});
