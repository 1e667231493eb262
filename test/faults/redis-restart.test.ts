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
    if ('reply' in flight && flight.reply.error) expect(flight.reply.error.code).toBe(ErrorCode.Unavailable);
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
      `new call while down: -32006 in ${Math.round(down.ms)} ms; call in flight answered ${'reply' in flight && flight.reply.error ? `-32006 "${flight.reply.error.message}"` : 'with its result'} ${Math.round(flightMs)} ms after the stop; /readyz 503 then 200; calls succeed ${Math.round(recoveredMs)} ms after Redis is back, same gateway and executor pids`,
    );
  });
});
