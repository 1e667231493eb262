/**
 * Tasks across a Redis failover (issue 26, item 2), for the Sentinel and Cluster suites alike:
 * task-augmented `run_command`s (SDK 1.x, 2025-11-25) started before the master is killed and held
 * running across it (each waits for a file the test writes after the promotion) are still known
 * afterwards, still working, and then end with their own outcome — their own stdout and exit
 * code, each run once; a task that had ended before the kill keeps its result. The failover
 * itself runs under the 64 callers of redis-failover.ts.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { RedisHa } from '../../bench/lib/redis-ha';
import * as H from '../helpers/tasks-harness';
import { runFailover } from './redis-failover';
import { eventually, FaultStack, note } from './stack';

const TASK_OWNER = 'ha-tasks';
/** Logs its tag, waits for `go` in the workspace, prints its tag and exits with `code`. */
const heldCommand = (tag: string, code: number) => `echo ${tag} >> tasks.log; while [ ! -e go ]; do sleep 0.1; done; echo ${tag}; exit ${code}`;

export async function runFailoverWithTasks(ha: RedisHa, stack: FaultStack, label: string): Promise<void> {
  const c = await H.legacyTaskClient({ url: stack.url }, stack.token(TASK_OWNER));
  try {
    const ended = (await H.legacyCallAsTask(c, 'run_command', { command: 'echo ended' }, 600_000)).task.taskId;
    expect(await H.legacyWaitTerminal(c, ended)).toMatchObject({ taskId: ended, status: 'completed' });
    const ok = (await H.legacyCallAsTask(c, 'run_command', { command: heldCommand('t-ok', 0), timeout_ms: 120_000 }, 600_000)).task.taskId;
    const exits = (await H.legacyCallAsTask(c, 'run_command', { command: heldCommand('t-exit', 7), timeout_ms: 120_000 }, 600_000)).task.taskId;
    await eventually(() => stack.linesOf(TASK_OWNER, 'tasks.log').length === 2, 'both tasks to be running');

    await runFailover(ha, stack, label);

    // Still known after the promotion, and still running: the failover did not end them.
    for (const id of [ok, exits]) expect(await H.legacyGetTask(c, id)).toMatchObject({ taskId: id, status: 'working' });
    expect(await H.legacyGetTask(c, ended)).toMatchObject({ taskId: ended, status: 'completed' });
    expect((await H.legacyTaskResult(c, ended)).structuredContent).toMatchObject({ stdout: 'ended\n', exitCode: 0 });

    const releasedAt = performance.now();
    await fs.writeFile(path.join(stack.workspaceOf(TASK_OWNER), 'go'), '');
    for (const [id, tag, code] of [
      [ok, 't-ok', 0],
      [exits, 't-exit', 7],
    ] as const) {
      expect(await H.legacyWaitTerminal(c, id, 30_000)).toMatchObject({ taskId: id, status: 'completed' });
      expect((await H.legacyTaskResult(c, id)).structuredContent).toMatchObject({ stdout: `${tag}\n`, exitCode: code });
    }
    expect(stack.linesOf(TASK_OWNER, 'tasks.log').sort()).toEqual(['t-exit', 't-ok']);
    note(
      `${label} (tasks)`,
      `2 tasks running across the failover ended with their own results ${Math.round(performance.now() - releasedAt)} ms after release, each run once`,
    );
  } finally {
    await c.close();
  }
}
