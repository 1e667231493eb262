/**
 * MCP tasks on top of the tool runner, for both eras:
 * - 2026-07-28, the `io.modelcontextprotocol/tasks` extension: the server decides. A call from a
 *   client that declared the extension and that is still running after `afterMs` is answered with
 *   a task handle (created durably first); the client polls `tasks/get`.
 * - 2025-11-25, task-augmented `tools/call`: the client decides (`params.task`), and gets the
 *   handle at once; `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`.
 * Once a call is a task, its caller going away no longer cancels it; `tasks/cancel` does (the
 * command's whole process group dies). A task belongs to its tenant: another identity's id is
 * answered exactly as an unknown one.
 */
import { randomUUID } from 'node:crypto';
import type { Caller } from '../auth/permissions';
import { ErrorCode, ProtocolError, toErrorObject } from '../protocol/errors';
import type { CallExtras, ToolRunner } from '../tools/runner';
import type { AnyTool, ToolResult } from '../tools/tool';
import { latestWins } from '../latest-wins';
import { outcomeFor, TaskRecord, TaskStore, TERMINAL } from '../tasks/task-store';

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
export const RELATED_TASK = 'io.modelcontextprotocol/related-task';

export interface TaskSettings {
  store: TaskStore;
  afterMs: number;
  ttlMs: number;
  pollIntervalMs: number;
  maxPerIdentity: number;
  maxResultBytes: number;
  /** Stops a task's call wherever it runs (another gateway's, on a shared bus). */
  abortElsewhere?: (taskId: string, tenant: string) => Promise<void>;
}

/** How often a working task's status line is written to the store, at most. */
const NOTE_GAP_MS = 1_000;
/** How often `tasks/result` looks whether its task has ended. */
const RESULT_POLL_MS = 200;

export const unknownTask = (taskId: unknown): ProtocolError =>
  new ProtocolError(
    ErrorCode.InvalidParams,
    `Failed to retrieve task: no task ${JSON.stringify(String(taskId).slice(0, 100))} (unknown, expired, or not yours)`,
  );

export type CallOutcome = { result: ToolResult } | { task: TaskRecord };

export class Tasks {
  /** Calls that became tasks in this process, so a cancel here reaches them at once. */
  private readonly local = new Map<string, AbortController>();

  constructor(
    readonly settings: TaskSettings,
    private readonly runner: ToolRunner,
  ) {}

  /**
   * Runs a call that may become a task. `when`: 'now' (a 2025-11-25 task request: the handle at
   * once) or 'late' (2026-07-28: the handle only if the call outlives `afterMs`). `ttlMs` is the
   * client's wish (2025-11-25), capped by the configured TTL.
   */
  async call(
    when: 'now' | 'late',
    tool: AnyTool,
    args: unknown,
    caller: Caller,
    requestSignal: AbortSignal,
    extras: CallExtras,
    ttlMs?: number,
  ): Promise<CallOutcome> {
    const { store } = this.settings;
    const taskId = randomUUID();
    const controller = new AbortController();
    const follow = () => controller.abort(requestSignal.reason);
    if (requestSignal.aborted) follow();
    else requestSignal.addEventListener('abort', follow, { once: true });

    let latest: string | undefined;
    let isTask = false;
    const notes = latestWins((message: string) => void store.note(taskId, message).catch(() => undefined), NOTE_GAP_MS);
    const onProgress = (message: string) => {
      latest = message;
      extras.onProgress?.(message);
      if (isTask) notes.push(message);
    };
    const running = this.runner.run(tool, args, caller, controller.signal, { ...extras, taskId, onProgress });
    const settled = running.then(
      (result) => ({ result }) as const,
      (error: unknown) => ({ error }) as const,
    );

    if (when === 'late') {
      let timer: NodeJS.Timeout | undefined;
      const first = await Promise.race([settled, new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), this.settings.afterMs)))]);
      clearTimeout(timer);
      if (first !== 'late') return this.plain(first, requestSignal, follow);
      // The caller left before the handle was due: the call is already being cancelled, as a plain call is.
      if (requestSignal.aborted) return this.plain(await settled, requestSignal, follow);
    }

    const now = Date.now();
    const task: TaskRecord = {
      taskId,
      tenant: caller.tenant,
      tool: tool.name,
      status: 'working',
      ...(latest !== undefined ? { statusMessage: latest } : {}),
      createdAt: now,
      lastUpdatedAt: now,
      ttlMs: Math.min(ttlMs ?? this.settings.ttlMs, this.settings.ttlMs),
      pollIntervalMs: this.settings.pollIntervalMs,
    };
    if (!(await store.create(task, this.settings.maxPerIdentity))) {
      if (when === 'now') {
        controller.abort(new ProtocolError(ErrorCode.Cancelled, 'Request cancelled'));
        throw new ProtocolError(
          ErrorCode.RateLimited,
          `Rate limited: ${caller.tenant} already has ${this.settings.maxPerIdentity} tasks working (TOOLGATE_MAX_TASKS_PER_IDENTITY)`,
          {
            limit: this.settings.maxPerIdentity,
            retryAfterMs: this.settings.pollIntervalMs,
          },
        );
      }
      // At the limit, a 2026-07-28 call simply stays a plain call.
      return this.plain(await settled, requestSignal, follow);
    }
    // From here the task owns the call: the caller leaving does not stop it.
    isTask = true;
    requestSignal.removeEventListener('abort', follow);
    this.local.set(taskId, controller);
    void settled.then(async (end) => {
      notes.stop();
      this.local.delete(taskId);
      const outcome = 'result' in end ? outcomeFor({ result: end.result }, this.settings.maxResultBytes) : { error: toErrorObject(end.error) };
      await store.finish(taskId, outcome).catch(() => undefined);
    });
    return { task };
  }

  /** Cancels the tenant's task: marked first (so its end stays `cancelled`), then its call stopped. */
  async cancel(tenant: string, taskId: string): Promise<{ before: TaskRecord; after: TaskRecord } | undefined> {
    const before = await this.settings.store.get(tenant, taskId);
    if (!before) return undefined;
    const after = (await this.settings.store.cancel(tenant, taskId)) ?? before;
    if (before.status === 'working') {
      const here = this.local.get(taskId);
      if (here) here.abort(new ProtocolError(ErrorCode.Cancelled, 'Request cancelled: the task was cancelled'));
      else await this.settings.abortElsewhere?.(taskId, tenant).catch(() => undefined);
    }
    return { before, after };
  }

  /** Waits until the tenant's task has ended (2025-11-25 `tasks/result`), or the request is cancelled. */
  async ended(tenant: string, taskId: string, signal: AbortSignal): Promise<TaskRecord> {
    for (;;) {
      const task = await this.settings.store.get(tenant, taskId);
      if (!task) throw unknownTask(taskId);
      if (TERMINAL.has(task.status)) return task;
      if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
      await new Promise((resolve) => setTimeout(resolve, RESULT_POLL_MS));
    }
  }

  private plain(end: { result: ToolResult } | { error: unknown }, requestSignal: AbortSignal, follow: () => void): CallOutcome {
    requestSignal.removeEventListener('abort', follow);
    if ('error' in end) throw end.error;
    return { result: end.result };
  }
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The 2026-07-28 Task (flat), with its result or error once ended (tasks/get). */
export function modernTask(task: TaskRecord, detailed: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {
    taskId: task.taskId,
    status: task.status,
    ...(task.statusMessage !== undefined ? { statusMessage: task.statusMessage } : {}),
    createdAt: iso(task.createdAt),
    lastUpdatedAt: iso(task.lastUpdatedAt),
    ttlMs: task.ttlMs,
    pollIntervalMs: task.pollIntervalMs,
  };
  if (detailed && task.status === 'completed' && task.result) out.result = { ...task.result, resultType: 'complete' };
  if (detailed && task.status === 'failed' && task.error) out.error = task.error;
  return out;
}

/** The 2025-11-25 Task. */
export function legacyTask(task: TaskRecord): Record<string, unknown> {
  return {
    taskId: task.taskId,
    status: task.status,
    ...(task.statusMessage !== undefined ? { statusMessage: task.statusMessage } : {}),
    createdAt: iso(task.createdAt),
    lastUpdatedAt: iso(task.lastUpdatedAt),
    ttl: task.ttlMs,
    pollInterval: task.pollIntervalMs,
  };
}
