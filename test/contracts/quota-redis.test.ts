import Redis from 'ioredis';
import { createRedisQuotaStore, LEASE_PREFIX } from '../../shared/quota/redis';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { quotaStoreContract } from './quota-store.suite';

describeRedis('quota store on a real Redis', () => {
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

  quotaStoreContract('redis', { create, peer: create, reset: async () => void (await admin.flushall()) });

  test('a lease whose holder stopped renewing it lapses: its slot is granted again', async () => {
    const store = await createRedisQuotaStore({ redis: redis.config, leaseTtlMs: 60_000 });
    try {
      // A holder that died: its lease is in the set, due to lapse a moment ago (Redis's clock).
      const [seconds] = await admin.time();
      await admin.zadd(`${LEASE_PREFIX}dead`, String(Number(seconds) * 1000 - 1), 'dead-holder');
      expect(await store.held('dead')).toBe(0);
      expect(await store.lease('dead', 1)).toBeDefined();
      expect(await admin.zscore(`${LEASE_PREFIX}dead`, 'dead-holder')).toBeNull();
    } finally {
      await store.close();
    }
  });

  test('a held lease is renewed, so it outlives its lifetime while its holder lives', async () => {
    const store = await createRedisQuotaStore({ redis: redis.config, leaseTtlMs: 1500 });
    try {
      const lease = await store.lease('renewed', 1);
      const [id] = await admin.zrange(`${LEASE_PREFIX}renewed`, '0', '-1');
      const first = Number(await admin.zscore(`${LEASE_PREFIX}renewed`, id!));
      // Wait until Redis's own clock is past the first lapse time: only a renewal keeps it.
      for (;;) {
        const [s, us] = await admin.time();
        if (Number(s) * 1000 + Math.floor(Number(us) / 1000) > first + 50) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(await store.held('renewed')).toBe(1);
      expect(await store.lease('renewed', 1)).toBeUndefined();
      await lease!.release();
    } finally {
      await store.close();
    }
  });

  test('with Redis unreachable, operations reject at once with QuotaStoreDown', async () => {
    const store = await createRedisQuotaStore({ redis: redis.config });
    try {
      await redis.stop();
      await expect(store.lease('x', 1)).rejects.toMatchObject({ name: 'QuotaStoreDown' });
      await expect(store.spend('x', 1)).rejects.toMatchObject({ name: 'QuotaStoreDown' });
    } finally {
      await redis.start();
      await store.close();
    }
  });
});
