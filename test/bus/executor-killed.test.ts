/**
 * An executor SIGKILLed in the middle of a job: the caller gets a JSON-RPC error within 10 s,
 * never a hang, and the job never runs a second time — whether another executor is alive (its
 * stall check fails the job) or none is (the gateway's watchdog notices).
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Redis from 'ioredis';
import type { Bus } from '../../shared/bus/bus';
import { queueName } from '../../shared/bus/redis-wire';
import { ErrorCode } from '../../shared/protocol/errors';
import { makeJob, never, textOf } from '../contracts/bus.suite';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { bullBus, ConsumerProcess, ensureBuilt, eventually, runs, spawnConsumer, stopConsumer } from './harness';

jest.setTimeout(60_000);

describeRedis('BullMQ bus: an executor killed mid-job', () => {
  let redis: TestRedis;
  let admin: Redis;
  let dir: string;
  let runLog: string;
  let gateway: Bus | undefined;
  const consumers: ConsumerProcess[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    redis = await startRedis();
    admin = new Redis(redis.url);
  }, 180_000);
  afterAll(async () => {
    admin?.disconnect();
    await redis?.close();
  });
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-killed-'));
    runLog = path.join(dir, 'runs.log');
    gateway = await bullBus(redis.url);
  });
  afterEach(async () => {
    for (const c of consumers.splice(0)) await stopConsumer(c);
    await gateway?.close();
    await admin.flushall();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const consumer = async () => {
    const c = await spawnConsumer({ REDIS_URL: redis.url, RUN_LOG: runLog });
    consumers.push(c);
    return c;
  };
  const jobFailedReason = async (id: string) => admin.hget(`bull:${queueName(0)}:${id}`, 'failedReason');

  /** Starts a hanging call on `victim`, kills it, and returns the caller's error and how long it took. */
  async function killMidJob(victim: ConsumerProcess, beforeKill: () => Promise<void> = async () => undefined) {
    const now = Date.now();
    const job = makeJob({ args: { hang: true }, deadline: now + 50_000, startBy: now + 30_000 });
    const outcome = gateway!.call(job, never()).then(
      () => new Error('the call succeeded'),
      (err: unknown) => err,
    );
    await eventually(async () => (await runs(runLog)).some(([, id]) => id === job.id), 'the executor to start the job');
    await beforeKill();
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    const err = await outcome;
    return { job, err, afterKillMs: Date.now() - killedAt };
  }

  it('with no executor left: the caller gets OutcomeUnknown (it had started) within 10 s; a new executor does not run the job again', async () => {
    const victim = await consumer();
    const { job, err, afterKillMs } = await killMidJob(victim);
    expect(err).toMatchObject({ code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(/executor that took this call stopped.*may have run/) });
    expect(afterKillMs).toBeLessThan(10_000);

    // A new executor takes the queue: the interrupted job is failed by its stall check, not re-run.
    await consumer();
    expect(textOf(await gateway!.call(makeJob(), never()))).toMatch(/^done by/);
    await eventually(async () => (await jobFailedReason(job.id)) !== null, 'BullMQ to fail the stalled job');
    expect(await jobFailedReason(job.id)).toMatch(/stalled/);
    expect((await runs(runLog)).filter(([, id]) => id === job.id)).toEqual([[String(victim.child.pid), job.id]]);
  });

  it('with another executor alive: its stall check fails the job, the caller learns within 10 s, the job ran once', async () => {
    const victim = await consumer();
    let survivor: ConsumerProcess | undefined;
    const { job, err, afterKillMs } = await killMidJob(victim, async () => {
      survivor = await consumer();
    });
    expect(err).toMatchObject({ code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(/executor that took this call stopped.*may have run/) });
    expect(afterKillMs).toBeLessThan(10_000);
    await eventually(async () => (await jobFailedReason(job.id)) !== null, 'BullMQ to fail the stalled job');
    expect(await jobFailedReason(job.id)).toMatch(/stalled/);
    expect(textOf(await gateway!.call(makeJob(), never()))).toBe(`done by ${survivor!.child.pid}`);
    expect((await runs(runLog)).filter(([, id]) => id === job.id)).toEqual([[String(victim.child.pid), job.id]]);
  });
});
