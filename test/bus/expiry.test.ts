/**
 * Jobs and results expire: after many calls the number of Redis keys stops growing (finished
 * jobs are kept by count and age; replies and events leave nothing behind).
 */
import Redis from 'ioredis';
import type { BullMqBus } from '../../shared/bus/bullmq';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import { makeJob, never, textResult } from '../contracts/bus.suite';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { bullBus } from './harness';

jest.setTimeout(60_000);

describeRedis('BullMQ bus: jobs and results expire', () => {
  let redis: TestRedis;
  let admin: Redis;
  let bus: BullMqBus | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    await bus?.close();
    admin?.disconnect();
    await redis?.close();
  });

  it('keeps the key count bounded however many calls pass', async () => {
    bus = await bullBus(redis.url, {}, { keepCompleted: { age: 3600, count: 20 }, keepFailed: { age: 3600, count: 20 } });
    await bus.consume(
      async (job) => {
        if ((job.args as { fail?: boolean }).fail) throw new ProtocolError(ErrorCode.InvalidParams, 'no');
        return textResult('x'.repeat(1000));
      },
      { concurrency: 8 },
    );
    const batch = async (n: number) => {
      await Promise.all(
        Array.from({ length: n }, (_, i) => bus!.call(makeJob({ args: { fail: i % 4 === 0, payload: 'y'.repeat(1000) } }), never()).catch(() => undefined)),
      );
    };
    await batch(100);
    const after100 = await admin.dbsize();
    await batch(400);
    const after500 = await admin.dbsize();
    expect(after500).toBeLessThanOrEqual(after100 + 2);
    // The finished jobs kept: at most 20 completed and 20 failed.
    const jobHashes = (await admin.keys('bull:toolgate-calls-0:*')).filter((k) => /:[0-9a-f-]{36}$/.test(k));
    expect(jobHashes.length).toBeLessThanOrEqual(40);
  });
});
