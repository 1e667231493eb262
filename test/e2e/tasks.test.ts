/**
 * MCP tasks with the official clients (issue 11; DESIGN §3):
 * - the Tasks client (`@modelcontextprotocol/ext-tasks` over `@modelcontextprotocol/client`,
 *   2026-07-28) gets a task for a long command, settles it, resumes it from a second connection,
 *   and cancels one (the command's process group is gone afterwards); another identity gets
 *   exactly the unknown-task answer; a client that never declared tasks never gets one;
 * - the SDK 1.x client (2025-11-25) runs a task-augmented call: tasks/get, tasks/result,
 *   tasks/list, tasks/cancel;
 * - on BullMQ the task is the job: a second gateway process answers for it, and an executor
 *   SIGKILLed mid-task ends it `failed` (Unavailable) with the command run once.
 */
import { FaultStack, ancestors, eventually, killGroup } from '../faults/stack';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import * as H from '../helpers/tasks-harness';

jest.setTimeout(90_000);

const TASK_ENV = { TOOLGATE_TASK_AFTER_MS: '800', TOOLGATE_TASK_POLL_MS: '200', TOOLGATE_PROGRESS_INTERVAL_MS: '500' };

/**
 * Who calls tools: the stacks' executors run on `none`, which serves one identity (README,
 * Sandboxes), so every test's caller is that identity; only the intruders, which never call a
 * tool (tasks are the gateway's), keep identities of their own.
 */
const caller = (tenant: string) => (['tasks-intruder', 'bull-other'].includes(tenant) ? tenant : `tasks-one-${process.pid}`);

/** A command that runs a few seconds, printing as it goes. */
const slow = (seconds: number, tag: string) => `for i in $(seq 1 ${seconds}); do echo "${tag} $i"; sleep 1; done; echo "${tag} done"`;

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('tasks on the embedded bus (2026-07-28 Tasks client, SDK 1.x 2025-11-25)', () => {
  let stack: FaultStack;
  const sessions: H.ModernTaskSession[] = [];
  const open = async (tenant: string, endpointId?: string) => {
    const s = await H.modernTaskSession({ url: stack.url }, stack.token(caller(tenant)), endpointId ? { endpointId } : {});
    sessions.push(s);
    return s;
  };
  beforeAll(async () => {
    stack = await FaultStack.start({ env: TASK_ENV });
  });
  afterAll(async () => {
    for (const s of sessions) await s.close();
    await stack?.close();
  });

  test("a long command becomes a task; the client settles it with the command's result", async () => {
    const s = await open('tasks-alice');
    const { execution, taskId } = await H.callTool(s, 'run_command', { command: slow(3, 'settle'), timeout_ms: 30_000 });
    expect(taskId).toEqual(expect.any(String));
    const view = await H.snapshot(s, taskId!);
    expect(view).toMatchObject({ taskId, status: 'working' });
    const settled = await H.settle(execution);
    expect(settled.status).toBe('completed');
    expect(JSON.stringify(settled.result)).toContain('settle done');
    expect(await H.snapshot(s, taskId!)).toMatchObject({ status: 'completed' });
  });

  test('the status message carries the newest output line while the task works', async () => {
    const s = await open('tasks-status');
    const { execution, taskId } = await H.callTool(s, 'run_command', { command: slow(5, 'line'), timeout_ms: 30_000 });
    const working = await H.waitForTask(s, taskId!, (t) => /line [2-5]/.test(t.statusMessage ?? ''));
    expect(working.status).toBe('working');
    await H.settle(execution);
  });

  test('a task resumes from a second connection after the first one goes away, and outlives it', async () => {
    const first = await open('tasks-resume');
    const { execution, taskId } = await H.callTool(first, 'run_command', { command: slow(3, 'resumed'), timeout_ms: 30_000 });
    await execution.detach();
    await first.close();
    const second = await open('tasks-resume', first.endpointId);
    const settled = await H.settle(await H.resumeTask(second, taskId!));
    expect(settled.status).toBe('completed');
    expect(JSON.stringify(settled.result)).toContain('resumed done');
  });

  test("tasks/cancel ends the task cancelled and kills the command's whole process group", async () => {
    const s = await open('tasks-cancel');
    // The shell prints its pid, then a child that would outlive a mere kill of the shell.
    const { taskId } = await H.callTool(s, 'run_command', { command: 'echo "pid $$"; sleep 60 & sleep 60; wait', timeout_ms: 120_000 });
    const working = await H.waitForTask(s, taskId!, (t) => /pid \d+/.test(t.statusMessage ?? ''));
    const shell = Number(/pid (\d+)/.exec(working.statusMessage!)![1]);
    expect(alive(shell)).toBe(true);
    await H.cancel(s, taskId!);
    expect(await H.waitForTask(s, taskId!, (t) => t.status === 'cancelled')).toMatchObject({ status: 'cancelled' });
    await eventually(() => !alive(shell), 'the cancelled command to be gone');
    // Its group: no process is left whose group is the shell's.
    await eventually(() => !alive(-shell), "the command's process group to be gone");
  });

  test('another identity gets exactly the answer an unknown task id gets', async () => {
    const owner = await open('tasks-owner');
    const intruder = await open('tasks-intruder');
    const { execution, taskId } = await H.callTool(owner, 'run_command', { command: slow(2, 'mine'), timeout_ms: 30_000 });
    const theirs = await H.rawModern(intruder, 'tasks/get', { taskId: taskId! });
    const unknown = await H.rawModern(intruder, 'tasks/get', { taskId: '00000000-0000-4000-8000-000000000000' });
    expect(theirs).toMatchObject({ kind: 'error', error: { code: -32602 } });
    expect(unknown).toMatchObject({ kind: 'error', error: { code: -32602 } });
    expect((theirs as { error: { message: string } }).error.message.replace(taskId!, 'X')).toBe(
      (unknown as { error: { message: string } }).error.message.replace('00000000-0000-4000-8000-000000000000', 'X'),
    );
    // Nor can it cancel it.
    expect(await H.rawModern(intruder, 'tasks/cancel', { taskId: taskId! })).toMatchObject({ kind: 'error', error: { code: -32602 } });
    expect((await H.settle(execution)).status).toBe('completed');
  });

  test('a client that never declared tasks never gets one: it waits for the result', async () => {
    const s = await open('tasks-undeclared');
    const reply = await H.rawModern(s, 'tools/call', { name: 'run_command', arguments: { command: 'sleep 2; echo plain' } }, false);
    expect(reply).toMatchObject({ kind: 'result', result: { resultType: 'complete', structuredContent: { stdout: 'plain\n' } } });
    // And tasks/* without the extension is a missing capability.
    expect(await H.rawModern(s, 'tasks/get', { taskId: 'x' }, false)).toMatchObject({ kind: 'error', error: { code: -32021 } });
  });

  test('a quick call of a client that declared tasks is answered inline', async () => {
    const s = await open('tasks-quick');
    // The tenant's sandbox is started first: a cold start alone can outlast TOOLGATE_TASK_AFTER_MS here.
    await H.rawModern(s, 'tools/call', { name: 'run_command', arguments: { command: 'true' } }, false);
    const reply = await H.rawModern(s, 'tools/call', { name: 'run_command', arguments: { command: 'echo quick' } });
    expect(reply).toMatchObject({ kind: 'result', result: { resultType: 'complete', structuredContent: { stdout: 'quick\n' } } });
  });

  test('2025-11-25 (SDK 1.x): a task-augmented call, tasks/get, tasks/result, tasks/list, tasks/cancel', async () => {
    const c = await H.legacyTaskClient({ url: stack.url }, stack.token(caller('tasks-legacy')));
    try {
      const created = await H.legacyCallAsTask(c, 'run_command', { command: slow(2, 'legacy'), timeout_ms: 30_000 }, 60_000);
      const id = created.task.taskId;
      expect(created.task).toMatchObject({ status: 'working', ttl: 60_000, pollInterval: 200 });
      expect(await H.legacyGetTask(c, id)).toMatchObject({ taskId: id });
      const result = await H.legacyTaskResult(c, id);
      expect(JSON.stringify(result.content)).toContain('legacy done');
      expect(result._meta).toMatchObject({ 'io.modelcontextprotocol/related-task': { taskId: id } });
      expect((await H.legacyListAllTasks(c)).map((t) => t.taskId)).toContain(id);

      const doomed = await H.legacyCallAsTask(c, 'run_command', { command: 'sleep 60', timeout_ms: 120_000 });
      expect(await H.legacyCancelTask(c, doomed.task.taskId)).toMatchObject({ taskId: doomed.task.taskId, status: 'cancelled' });
      // Cancelling an ended task is an error in 2025-11-25.
      await expect(H.legacyCancelTask(c, doomed.task.taskId)).rejects.toMatchObject({ code: -32602 });
    } finally {
      await c.client.close();
    }
  });
});

describeRedis('tasks on BullMQ: the task is the job', () => {
  let redis: TestRedis;
  let stack: FaultStack;
  let second: FaultStack;
  const sessions: H.ModernTaskSession[] = [];
  const leftovers: number[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    stack = await FaultStack.start({ redis, executors: 1, env: TASK_ENV });
    // A second gateway process on the same Redis and secret, with no executor of its own.
    second = await FaultStack.start({ redis, executors: 0, env: { ...TASK_ENV, TOOLGATE_JWT_SECRET: stack.secret } });
  });
  afterAll(async () => {
    leftovers.forEach(killGroup);
    for (const s of sessions) await s.close();
    await second?.close();
    await stack?.close();
    await redis?.close();
  });
  const open = async (url: string, tenant: string, endpointId = 'toolgate:bullmq') => {
    const s = await H.modernTaskSession({ url }, stack.token(caller(tenant)), { endpointId });
    sessions.push(s);
    return s;
  };

  test('made through one gateway, resumed, watched and settled through another', async () => {
    const a = await open(stack.url, 'bull-resume');
    const { execution, taskId } = await H.callTool(a, 'run_command', { command: slow(3, 'crossed'), timeout_ms: 30_000 });
    await execution.detach();
    await a.close();
    const b = await open(second.url, 'bull-resume');
    expect(await H.snapshot(b, taskId!)).toMatchObject({ taskId, status: 'working' });
    const settled = await H.settle(await H.resumeTask(b, taskId!));
    expect(settled.status).toBe('completed');
    expect(JSON.stringify(settled.result)).toContain('crossed done');
    // Another identity, on either gateway: unknown.
    const other = await open(second.url, 'bull-other');
    expect(await H.rawModern(other, 'tasks/get', { taskId: taskId! })).toMatchObject({ kind: 'error', error: { code: -32602 } });
  });

  test('cancelled through the other gateway: the executor kills the process group', async () => {
    const a = await open(stack.url, 'bull-cancel');
    const { execution, taskId } = await H.callTool(a, 'run_command', { command: 'echo "pid $$"; sleep 60 & sleep 60; wait', timeout_ms: 120_000 });
    await execution.detach();
    const b = await open(second.url, 'bull-cancel');
    const working = await H.waitForTask(b, taskId!, (t) => /pid \d+/.test(t.statusMessage ?? ''));
    const shell = Number(/pid (\d+)/.exec(working.statusMessage!)![1]);
    leftovers.push(shell);
    await H.cancel(b, taskId!);
    expect(await H.waitForTask(a, taskId!, (t) => t.status === 'cancelled')).toMatchObject({ status: 'cancelled' });
    await eventually(() => !alive(-shell), 'the process group to be gone');
  });

  test('an executor SIGKILLed mid-task ends the task failed (OutcomeUnknown: it may have run), and the command ran once', async () => {
    const a = await open(stack.url, 'bull-kill');
    const { execution, taskId } = await H.callTool(a, 'run_command', { command: 'echo $$ >> runs.log; echo started; sleep 30', timeout_ms: 60_000 });
    await execution.detach();
    await eventually(() => stack.linesOf(caller('bull-kill'), 'runs.log').length > 0, 'the command to start');
    const shell = Number(stack.linesOf(caller('bull-kill'), 'runs.log')[0]);
    leftovers.push(shell);
    const victim = stack.executors.find((e) => ancestors(shell).includes(e.pid));
    if (!victim) throw new Error(`no executor runs the command\n${stack.logs()}`);
    await stack.kill(victim, 'SIGKILL');
    // A survivor's stall check is what ends a dead executor's job: start one.
    await stack.startExecutor();
    const failed = await H.waitForTask(a, taskId!, (t) => t.status !== 'working', 30_000);
    expect(failed.status).toBe('failed');
    const raw = await H.rawModern(a, 'tasks/get', { taskId: taskId! });
    expect(raw).toMatchObject({ kind: 'result', result: { status: 'failed', error: { code: -32010 } } });
    await new Promise((r) => setTimeout(r, 3000));
    expect(stack.linesOf(caller('bull-kill'), 'runs.log')).toHaveLength(1);
  });
});
