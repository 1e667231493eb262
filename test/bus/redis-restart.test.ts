/**
 * Redis restarted under a running bus (stopped, then started empty on the same port): calls
 * fail Unavailable at once while it is down, a call in flight is answered rather than left
 * hanging, and the same Bus object works again once Redis is back — no restart of ours.
 *
 * Honest failures: when Redis loses calls (restarted empty, or FLUSHALL), a call an executor had
 * started is answered OutcomeUnknown (it may have run), a call still queued Unavailable (it did
 * not run: safe to retry) — never the other way round.
 */
import Redis from 'ioredis';
import { ErrorCode } from '../../shared/protocol/errors';
import type { BullMqBus } from '../../shared/bus/bullmq';
import { makeJob, never, textOf, textResult } from '../contracts/bus.suite';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { bullBus, eventually } from './harness';

jest.setTimeout(60_000);

describeRedis('BullMQ bus: Redis restarted', () => {
  let redis: TestRedis;
  let bus: BullMqBus | undefined;

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await bus?.close();
    await redis?.close();
  });

  it('answers Unavailable while Redis is down and recovers by itself', async () => {
    bus = await bullBus(redis.url);
    await bus.consume(
      async (job) => {
        const { sleepMs = 0 } = job.args as { sleepMs?: number };
        await new Promise((r) => setTimeout(r, sleepMs));
        return textResult(`ok ${job.id}`);
      },
      { concurrency: 4 },
    );
    const first = makeJob();
    expect(textOf(await bus.call(first, never()))).toBe(`ok ${first.id}`);

    // In flight when Redis goes away: answered (Unavailable) long before its 40 s deadline.
    const inFlight = bus.call(makeJob({ args: { sleepMs: 1500 }, deadline: Date.now() + 40_000, startBy: Date.now() + 30_000 }), never()).then(
      (r) => r,
      (e: unknown) => e,
    );
    await new Promise((r) => setTimeout(r, 200));
    await redis.stop();

    const down = await bus.call(makeJob(), never()).catch((e: unknown) => e);
    expect(down).toMatchObject({ code: ErrorCode.Unavailable, message: expect.stringMatching(/unreachable/) });
    expect(await bus.ready()).toBe(false);
    await expect(bus.revocations.revoke('alice', 10)).rejects.toMatchObject({ code: ErrorCode.Unavailable });
    const answer = await inFlight;
    expect(answer).not.toMatchObject({ code: ErrorCode.Timeout });
    // It had started: it may have run, so it is not answered "safe to retry".
    if (answer instanceof Error) expect(answer).toMatchObject({ code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(/may have run/) });

    await redis.start();
    await eventually(() => bus!.ready(), 'the bus to be ready again', 15_000);
    await eventually(
      () =>
        bus!.call(makeJob(), never()).then(
          () => true,
          () => false,
        ),
      'calls to succeed again',
      15_000,
    );
    const again = await Promise.all(Array.from({ length: 20 }, () => makeJob()).map(async (job) => [job.id, textOf(await bus!.call(job, never()))]));
    for (const [id, text] of again) expect(text).toBe(`ok ${id}`);
    await bus.revocations.revoke('alice', 10);
    expect(bus.revocations.notBefore('alice')).toBe(10);
    await bus.close();
  });

  it('closes without hanging while Redis is down', async () => {
    if (!redis.running) await redis.start();
    const other = await bullBus(redis.url);
    await other.consume(async (_, { signal }) => new Promise((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason))), {
      concurrency: 1,
    });
    const call = other.call(makeJob(), never()).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 200));
    await redis.stop();
    await other.close();
    // It was running when the gateway closed: it may have run.
    expect(await call).toMatchObject({ code: ErrorCode.OutcomeUnknown });
  });

  describe.each([
    ['restarted empty', async () => (await redis.stop(), await redis.start())],
    [
      'flushed (FLUSHALL)',
      async () => {
        const client = new Redis(redis.url);
        await client.flushall();
        client.disconnect();
      },
    ],
  ])('calls Redis loses when it is %s', (_name, lose) => {
    it('a started call is OutcomeUnknown, a queued one Unavailable (never run)', async () => {
      if (!redis.running) await redis.start();
      const lossy = await bullBus(redis.url);
      try {
        const started: string[] = [];
        // One slot, held by a call that outlives the test's checks: the next call stays queued.
        await lossy.consume(
          async (job, { signal }) => {
            started.push(job.id);
            await new Promise((r) => {
              const t = setTimeout(r, 20_000);
              signal.addEventListener('abort', () => (clearTimeout(t), r(undefined)));
            });
            return textResult('late');
          },
          { concurrency: 1 },
        );
        const long = () => makeJob({ deadline: Date.now() + 40_000, startBy: Date.now() + 30_000 });
        const running = long();
        const queued = long();
        const runningAnswer = lossy.call(running, never()).catch((e: unknown) => e);
        await eventually(async () => started.includes(running.id), 'the first call to start');
        const queuedAnswer = lossy.call(queued, never()).catch((e: unknown) => e);
        await new Promise((r) => setTimeout(r, 300));
        await lose();

        expect(await runningAnswer).toMatchObject({
          code: ErrorCode.OutcomeUnknown,
          message: expect.stringMatching(/lost this call after an executor took it.*may have run/),
        });
        expect(await queuedAnswer).toMatchObject({
          code: ErrorCode.Unavailable,
          message: expect.stringMatching(/lost this call before any executor started it.*did not run/),
        });
        expect(started).not.toContain(queued.id);
      } finally {
        await lossy.close();
      }
    });
  });
});
