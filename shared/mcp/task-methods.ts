/**
 * The MCP task methods, both eras: `tasks/get`, `tasks/cancel`, `tasks/update` (2026-07-28),
 * `tasks/result` and `tasks/list` (2025-11-25). A task belongs to the tenant that made it: any
 * other tenant gets exactly the unknown-task answer.
 */
import type { Caller } from '../auth/permissions';
import type { MethodHandler } from '../protocol/dispatcher';
import { ErrorCode, ErrorCodeValue, ProtocolError } from '../protocol/errors';
import type { JsonRpcParams } from '../protocol/jsonrpc';
import { BadCursor } from '../tasks/task-store';
import type { RequestEra } from './envelope';
import { asObject, declaresTasks, invalidParams, serve } from './era';
import { legacyTask, modernTask, RELATED_TASK, Tasks, TASKS_EXTENSION, unknownTask } from './tasks';

/** A modern request must have declared the tasks extension to use the task methods. */
function requireTasks(era: RequestEra): void {
  if (era.era === 'modern' && !declaresTasks(era)) {
    throw new ProtocolError(
      ErrorCode.MissingRequiredClientCapability,
      `Missing required client capability: declare the ${TASKS_EXTENSION} extension to use tasks`,
      {
        requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
      },
    );
  }
}

export function taskMethods(tasks: Tasks): Array<[string, MethodHandler<Caller>]> {
  /** The tenant's task named in params, or the unknown-task error (another tenant's included). */
  const taskOf = async (params: JsonRpcParams | undefined, caller: Caller) => {
    const taskId = asObject(params).taskId;
    if (typeof taskId !== 'string') invalidParams('params.taskId must be a string');
    const task = await tasks.settings.store.get(caller.tenant, taskId);
    if (!task) throw unknownTask(taskId);
    return task;
  };
  return [
    [
      'tasks/get',
      serve('tasks/get', 'both', async (params, { caller }, era) => {
        requireTasks(era);
        const task = await taskOf(params, caller);
        return era.era === 'modern' ? modernTask(task, true) : legacyTask(task);
      }),
    ],
    [
      'tasks/cancel',
      serve('tasks/cancel', 'both', async (params, { caller }, era) => {
        requireTasks(era);
        const task = await taskOf(params, caller);
        if (era.era === 'legacy' && task.status !== 'working') invalidParams(`Cannot cancel task ${task.taskId}: it is already ${task.status}`);
        const done = await tasks.cancel(caller.tenant, task.taskId);
        if (!done) throw unknownTask(task.taskId);
        return era.era === 'modern' ? {} : legacyTask(done.after);
      }),
    ],
    [
      // 2026-07-28: input for a task that asked for it. toolgate's tools never ask, so there is
      // nothing to route; the update is acknowledged once the task is known to be the caller's.
      'tasks/update',
      serve('tasks/update', 'modern', async (params, { caller }, era) => {
        requireTasks(era);
        await taskOf(params, caller);
        return {};
      }),
    ],
    [
      'tasks/result',
      serve('tasks/result', 'legacy', async (params, { caller, signal }) => {
        const task = await tasks.ended(caller.tenant, (await taskOf(params, caller)).taskId, signal);
        const related = { [RELATED_TASK]: { taskId: task.taskId } };
        if (task.status === 'completed' && task.result) return { ...task.result, _meta: { ...related } };
        if (task.status === 'failed' && task.error) {
          const data = typeof task.error.data === 'object' && task.error.data !== null ? (task.error.data as Record<string, unknown>) : undefined;
          throw new ProtocolError(task.error.code as ErrorCodeValue, task.error.message, data);
        }
        throw new ProtocolError(ErrorCode.Cancelled, `Task ${task.taskId} was cancelled`, { taskId: task.taskId });
      }),
    ],
    [
      'tasks/list',
      serve('tasks/list', 'legacy', async (params, { caller }) => {
        const cursor = asObject(params).cursor;
        if (cursor !== undefined && typeof cursor !== 'string') invalidParams('params.cursor must be a string');
        try {
          const page = await tasks.settings.store.list(caller.tenant, cursor, 50);
          return { tasks: page.tasks.map(legacyTask), ...(page.nextCursor !== undefined ? { nextCursor: page.nextCursor } : {}) };
        } catch (err) {
          if (err instanceof BadCursor) invalidParams('Invalid cursor');
          throw err;
        }
      }),
    ],
  ];
}
