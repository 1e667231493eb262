/**
 * Tenant affinity: tenants are spread over TOOLGATE_SHARDS queues by a stable hash and an
 * executor consumes only the shards it owns, so with one executor per shard every call of a
 * tenant reaches the same executor (where its sandbox lives).
 */
import type { Bus } from '../../shared/bus/bus';
import { shardOf } from '../../shared/bus/redis-wire';
import { makeJob, never, textOf, textResult } from '../contracts/bus.suite';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { bullBus } from './harness';

jest.setTimeout(60_000);

describe('shardOf', () => {
  it('is stable, spreads tenants and stays in range', () => {
    expect(shardOf('alice', 1)).toBe(0);
    // FNV-1a 32-bit of "a" is 0xe40c292c: every process and version must agree.
    expect(shardOf('a', 2 ** 32 - 1)).toBe(0xe40c292c);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) counts[shardOf(`tenant-${i}`, 4)]!++;
    for (const c of counts) expect(c).toBeGreaterThan(800);
  });
});

describeRedis('BullMQ bus: shards and tenant affinity', () => {
  let redis: TestRedis;
  const buses: Bus[] = [];
  const open = async (env: Record<string, string>) => {
    const bus = await bullBus(redis.url, { TOOLGATE_SHARDS: '2', ...env });
    buses.push(bus);
    return bus;
  };

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const b of buses) await b.close();
    await redis?.close();
  });

  it('sends each tenant to the one executor owning its shard', async () => {
    const gateway = await open({});
    for (const shard of [0, 1]) {
      const executor = await open({ TOOLGATE_EXECUTOR_SHARDS: String(shard) });
      await executor.consume(async (job) => textResult(`${shard} ${job.tenant}`), { concurrency: 4 });
    }
    const tenants = Array.from({ length: 40 }, (_, i) => `tenant-${i}`);
    const replies = await Promise.all([...tenants, ...tenants].map((tenant) => gateway.call(makeJob({ tenant }), never())));
    replies.forEach((reply, i) => {
      const tenant = tenants[i % tenants.length]!;
      expect(textOf(reply)).toBe(`${shardOf(tenant, 2)} ${tenant}`);
    });
  });

  it('refuses to consume a shard that does not exist', async () => {
    const executor = await open({ TOOLGATE_EXECUTOR_SHARDS: '0,2' });
    await expect(executor.consume(async () => textResult(''), { concurrency: 1 })).rejects.toThrow(
      /TOOLGATE_EXECUTOR_SHARDS names shard 2, but TOOLGATE_SHARDS is 2/,
    );
  });
});
