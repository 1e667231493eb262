/**
 * Fault: Redis restarted (stopped, then started empty on the same port, as a crashed Redis
 * without persistence comes back). Real processes: redis-server, `toolgate serve` on BullMQ, a
 * `toolgate executor`. The promise (gateway issue): meanwhile the gateway answers with errors —
 * at once for new calls, within a bounded time for the call in flight, /readyz 503 — and once
 * Redis is back everything works again without restarting the gateway or the executor.
 */
import { ErrorCode } from '../../shared/protocol/errors';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { eventually, FaultStack, note, resultOf } from './stack';

jest.setTimeout(60_000);

describeRedis('fault: Redis restarted under the gateway and executor', () => {
  let redis: TestRedis;
  let stack: FaultStack;

  beforeAll(async () => {
    redis = await startRedis();
    stack = await FaultStack.start({ redis, executors: 1 });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await redis?.close();
  });

  it('answers errors while Redis is down and recovers by itself', async () => {
    const token = stack.token('redis-fault');
    const gatewayPid = stack.gateway!.pid;
    const executorPid = stack.executors[0]!.pid;
    expect(resultOf(await stack.call(token, 'run_command', { command: 'echo before' }))).toMatchObject({ stdout: 'before\n' });

    // In flight when Redis goes away.
    const inFlight = stack.call(token, 'run_command', { command: 'sleep 2; echo late' }, { id: 'in-flight', timeoutMs: 30_000 });
    await eventually(async () => (await stack.readyz()) === 200, 'the gateway to be ready');
    await new Promise((r) => setTimeout(r, 300));
    const stoppedAt = performance.now();
    await redis.stop();

    const down = await stack.call(token, 'run_command', { command: 'echo while-down' }, { id: 'down' });
    expect(down).toMatchObject({ status: 200, reply: { id: 'down', error: { code: ErrorCode.Unavailable, message: expect.stringMatching(/unreachable/) } } });
    expect(down.ms).toBeLessThan(5000);
    expect(await stack.readyz()).toBe(503);

    // Answered, not left hanging: an error (the outcome is unknown while Redis is gone) or, if
    // it squeezed through before the stop, its own result.
    const flight = await inFlight;
    const flightMs = performance.now() - stoppedAt;
    expect(flight).toMatchObject({ status: 200, reply: { id: 'in-flight' } });
    // It had started: if its answer is lost, it may have run (-32010), never "safe to retry".
    if ('reply' in flight && flight.reply.error) expect(flight.reply.error.code).toBe(ErrorCode.OutcomeUnknown);
    else expect(resultOf(flight)).toMatchObject({ stdout: 'late\n' });
    expect(flightMs).toBeLessThan(10_000);

    const restartedAt = performance.now();
    await redis.start();
    await eventually(
      async () => {
        const a = await stack.call(token, 'run_command', { command: 'echo back' }, { timeoutMs: 5000 });
        return 'reply' in a && (a.reply.result?.structuredContent as { stdout?: string } | undefined)?.stdout === 'back\n';
      },
      'calls to succeed again',
      20_000,
    );
    const recoveredMs = performance.now() - restartedAt;
    expect(await stack.readyz()).toBe(200);

    // The same processes (nobody restarted them), and every caller gets its own answer.
    expect(stack.gateway!.pid).toBe(gatewayPid);
    expect(stack.executors[0]!.pid).toBe(executorPid);
    const answers = await Promise.all(
      Array.from({ length: 16 }, (_, i) => stack.call(token, 'run_command', { command: `echo after-${i}` }, { id: `after-${i}` })),
    );
    answers.forEach((a, i) => {
      expect(a).toMatchObject({ reply: { id: `after-${i}` } });
      expect(resultOf(a)).toMatchObject({ stdout: `after-${i}\n` });
    });
    note(
      'Redis restarted',
      `new call while down: -32006 in ${Math.round(down.ms)} ms; call in flight answered ${'reply' in flight && flight.reply.error ? `${flight.reply.error.code} "${flight.reply.error.message}"` : 'with its result'} ${Math.round(flightMs)} ms after the stop; /readyz 503 then 200; calls succeed ${Math.round(recoveredMs)} ms after Redis is back, same gateway and executor pids`,
    );
  });
});

describeRedis('fault: Redis restarted empty while a command runs and another call waits for a slot', () => {
  let redis: TestRedis;
  let stack: FaultStack;

  beforeAll(async () => {
    redis = await startRedis();
    // One executor slot, so the second call waits in Redis (not in the gateway's admission).
    stack = await FaultStack.start({ redis, executors: 1, env: { TOOLGATE_EXECUTOR_CONCURRENCY: '1', TOOLGATE_TENANT_CONCURRENCY: '4' } });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await redis?.close();
  });

  it('answers the started call -32010 (it may have run) and the queued one -32006 (it did not run)', async () => {
    const token = stack.token('redis-lost');
    const slow = stack.call(token, 'run_command', { command: 'echo $$ >> runs.log; sleep 6; echo late' }, { id: 'slow', timeoutMs: 30_000 });
    await eventually(() => stack.linesOf('redis-lost', 'runs.log').length > 0, 'the slow command to start');
    const queued = stack.call(token, 'run_command', { command: 'echo queued >> queued.log' }, { id: 'queued', timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 500));
    await redis.stop();
    await redis.start();

    expect(await slow).toMatchObject({
      status: 200,
      reply: { id: 'slow', error: { code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(/may have run/) } },
    });
    expect(await queued).toMatchObject({
      status: 200,
      reply: { id: 'queued', error: { code: ErrorCode.Unavailable, message: expect.stringMatching(/did not run/) } },
    });
    // Past the slow command's end, when its slot is free again: the queued command never ran.
    await new Promise((r) => setTimeout(r, 7000));
    expect(stack.linesOf('redis-lost', 'queued.log')).toEqual([]);
    expect(stack.linesOf('redis-lost', 'runs.log')).toHaveLength(1);
    note('Redis restarted empty', 'the running call got -32010 (may have run), the queued one -32006 (did not run), and it never ran');
  });
});
