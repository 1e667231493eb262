/**
 * Fault: the tenant's sandbox killed in the middle of a call — its container (`docker kill`, the
 * docker backend) or its agent process (SIGKILL, the none backend, which runs everywhere).
 * Real processes: `toolgate serve` with its embedded executor. The promise (containers issue):
 * the call fails with a clear error (-32010 "Outcome unknown: …": it may have run in part) within a bounded time, the
 * command is not run again, and the next call works on a recreated sandbox with the workspace
 * kept (self-recovery, no restart of anything).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { childrenMap } from '../../bench/lib/rss';
import { ErrorCode } from '../../shared/protocol/errors';
import { describeIf } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, sandboxContainers } from '../helpers/docker';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { Answer, eventually, FaultStack, killGroup, note, resultOf, sleep } from './stack';

jest.setTimeout(60_000);

interface Backend {
  name: 'none' | 'docker';
  /** Run the executor as its own process on a Redis bus (else embedded in serve). */
  redis?: boolean;
  /** The tenant's one live sandbox (container id, agent pid). */
  identify(stack: FaultStack, tenant: string): string;
  kill(id: string): void;
  /** Checks after the stack has stopped (nothing left behind). */
  afterClose?(tenant: string): Promise<void>;
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

function sandboxKilledSuite(backend: Backend): void {
  let stack: FaultStack;
  const leftovers: number[] = [];

  let redis: TestRedis | undefined;

  beforeAll(async () => {
    if (backend.name === 'docker') await ensureSandboxImage();
    if (backend.redis) redis = await startRedis();
    stack = await FaultStack.start({ sandbox: backend.name, ...(redis ? { redis, executors: 1 } : {}) });
  }, 240_000);
  afterAll(async () => {
    leftovers.forEach(killGroup);
    await stack?.close();
    await redis?.close();
    await backend.afterClose?.(`sandbox-kill-${backend.name}`);
  });

  it('the call fails with a clear error, nothing runs twice, the next call gets a new sandbox and the same workspace', async () => {
    const tenant = `sandbox-kill-${backend.name}`;
    const token = stack.token(tenant);
    expect(resultOf(await stack.call(token, 'write_file', { path: 'kept.txt', content: 'still here' }))).toMatchObject({ path: 'kept.txt' });

    const answer: Promise<Answer> = stack.call(
      token,
      'run_command',
      { command: 'echo $$ >> runs.log; sleep 20', timeout_ms: 30_000 },
      { id: 'doomed', timeoutMs: 30_000 },
    );
    await eventually(() => stack.linesOf(tenant, 'runs.log').length > 0, 'the command to start');
    const shell = Number(stack.linesOf(tenant, 'runs.log')[0]);
    if (backend.name === 'none') leftovers.push(shell);
    const before = backend.identify(stack, tenant);
    const killedAt = performance.now();
    backend.kill(before);
    const got = await answer;
    const afterKillMs = performance.now() - killedAt;

    expect(got).toMatchObject({
      status: 200,
      reply: {
        id: 'doomed',
        error: { code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(/^Outcome unknown: the sandbox ended while the call ran in it/) },
      },
    });
    expect(afterKillMs).toBeLessThan(10_000);

    const t0 = performance.now();
    const next = resultOf(await stack.call(token, 'run_command', { command: 'cat kept.txt' }));
    const recoverMs = performance.now() - t0;
    expect(next).toMatchObject({ exitCode: 0, stdout: 'still here' });
    const after = backend.identify(stack, tenant);
    expect(after).not.toBe(before);

    await sleep(500);
    expect(stack.linesOf(tenant, 'runs.log')).toHaveLength(1);
    const message = (got as { reply: { error: { message: string } } }).reply.error.message;
    note(
      `sandbox killed (${backend.name})`,
      `-32010 "${message}" ${Math.round(afterKillMs)} ms after the kill; next call on a new sandbox (${recoverMs.toFixed(0)} ms, workspace kept); command ran once`,
    );
  });
}

describeRedis('fault: the sandbox agent SIGKILLed mid-call (none backend)', () => {
  sandboxKilledSuite({
    name: 'none',
    redis: true,
    // The agent: a child process of `toolgate executor` running the agent's main.
    identify: (stack) => {
      const agents = (childrenMap().get(stack.executors[0]!.pid) ?? []).filter((pid) => cmdline(pid).includes('agent/main.js'));
      if (agents.length !== 1) throw new Error(`expected one sandbox agent under the executor process, found ${agents.length}`);
      return String(agents[0]);
    },
    kill: (pid) => process.kill(Number(pid), 'SIGKILL'),
  });
});

describeIf(dockerUnavailable === undefined, dockerUnavailable ?? '', 'fault: the sandbox container killed mid-call (docker backend)', () => {
  sandboxKilledSuite({
    name: 'docker',
    identify: (_stack, tenant) => {
      const ids = sandboxContainers(tenant, true);
      if (ids.length !== 1) throw new Error(`expected one running sandbox container for ${tenant}, found ${ids.length}`);
      return ids[0]!;
    },
    kill: (id) => execFileSync('docker', ['kill', id], { stdio: 'ignore' }),
    // The executor removes a container once it exits, and every one when it stops: none may be left.
    afterClose: (tenant) => eventually(() => sandboxContainers(tenant).length === 0, `the sandbox containers of ${tenant} to be removed`),
  });
});
