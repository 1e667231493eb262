/**
 * Fault: an executor SIGKILLed in the middle of a job. Real processes: redis-server, `toolgate
 * serve` on BullMQ, `toolgate executor`s with the none sandbox. The promise (gateway issue):
 * the caller gets a JSON-RPC error within 10 s, never a hang, and the command did not run twice
 * — the command appends a line to a file in the workspace, and that file has one line for good
 * (checked after the stall checks that could have re-run it). Two cases: another executor is
 * alive (its stall check fails the job), and none is (the gateway's watchdog notices; a new
 * executor started afterwards does not pick the job up again). Both then serve the next call.
 */
import { ErrorCode } from '../../shared/protocol/errors';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { ancestors, Answer, eventually, FaultStack, killGroup, note, resultOf, sleep } from './stack';

jest.setTimeout(60_000);

describeRedis('fault: an executor SIGKILLed mid-job', () => {
  let redis: TestRedis;
  let stack: FaultStack;
  const leftovers: number[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    // Both executors consume the one shard: either may take the job, the other survives.
    stack = await FaultStack.start({ redis, executors: 2 });
  }, 60_000);
  afterAll(async () => {
    leftovers.forEach(killGroup);
    await stack?.close();
    await redis?.close();
  });

  /** Starts a command that records its shell's pid in `file` and sleeps; kills the executor running it. */
  async function killMidJob(tenant: string, file: string) {
    const token = stack.token(tenant);
    const answer: Promise<Answer> = stack.call(
      token,
      'run_command',
      { command: `echo $$ >> ${file}; sleep 20`, timeout_ms: 30_000 },
      { id: `${tenant}-job`, timeoutMs: 30_000 },
    );
    await eventually(() => stack.linesOf(tenant, file).length > 0, 'the command to start');
    const shell = Number(stack.linesOf(tenant, file)[0]);
    leftovers.push(shell);
    const chain = ancestors(shell);
    const victim = stack.executors.find((e) => chain.includes(e.pid));
    if (!victim) throw new Error(`no executor is an ancestor of the command (chain ${chain.join(' ← ')})\n${stack.logs()}`);
    const killedAt = performance.now();
    await stack.kill(victim, 'SIGKILL');
    const got = await answer;
    return { got, afterKillMs: performance.now() - killedAt, token };
  }

  it('with another executor alive: an error within 10 s, the command ran once, the survivor serves the next call', async () => {
    const { got, afterKillMs, token } = await killMidJob('kill-a', 'runs.log');
    expect(got).toMatchObject({
      status: 200,
      // The command had started: it may have run, so the answer is not "safe to retry".
      reply: { id: 'kill-a-job', error: { code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(/executor .*stopped.*may have run/) } },
    });
    expect(afterKillMs).toBeLessThan(10_000);

    // Past several lock durations and stall checks: nothing ran the command again.
    await sleep(3000);
    expect(stack.linesOf('kill-a', 'runs.log')).toHaveLength(1);
    expect(stack.executors).toHaveLength(1);
    expect(resultOf(await stack.call(token, 'run_command', { command: 'echo again' }))).toMatchObject({ stdout: 'again\n', exitCode: 0 });
    note(
      'executor SIGKILLed (another executor alive)',
      `caller got -32010 ${Math.round(afterKillMs)} ms after the kill; command ran once; next call served by the survivor`,
    );
  });

  it('with no executor left: an error within 10 s; a new executor does not run the job again and serves the next call', async () => {
    // The same identity as above: the executors run on `none`, which serves one identity only.
    const { got, afterKillMs, token } = await killMidJob('kill-a', 'runs-b.log');
    expect(got).toMatchObject({ status: 200, reply: { id: 'kill-a-job', error: { code: ErrorCode.OutcomeUnknown } } });
    expect(afterKillMs).toBeLessThan(10_000);
    expect(stack.executors).toHaveLength(0);

    await stack.startExecutor();
    expect(resultOf(await stack.call(token, 'run_command', { command: 'echo back' }))).toMatchObject({ stdout: 'back\n', exitCode: 0 });
    await sleep(3000);
    expect(stack.linesOf('kill-a', 'runs-b.log')).toHaveLength(1);
    note(
      'executor SIGKILLed (none left)',
      `caller got -32010 (${(got as { reply: { error: { message: string } } }).reply.error.message}) ${Math.round(afterKillMs)} ms after the kill; a new executor did not re-run it`,
    );
  });
});
