/**
 * Tasks in this process's memory: for `toolgate stdio` and `toolgate serve` on the embedded bus,
 * where the process that runs a call is the only one that can answer for it. Gone on restart.
 */
import { BadCursor, TaskOutcome, TaskPage, TaskRecord, TaskStore } from './task-store';

export class MemoryTaskStore implements TaskStore {
  private readonly tasks = new Map<string, { task: TaskRecord; expiry: NodeJS.Timeout }>();

  constructor(private readonly now: () => number = Date.now) {}

  async create(task: TaskRecord, maxLive: number): Promise<boolean> {
    let live = 0;
    for (const { task: t } of this.tasks.values()) if (t.tenant === task.tenant && t.status === 'working') live++;
    if (live >= maxLive) return false;
    const expiry = setTimeout(() => this.tasks.delete(task.taskId), task.ttlMs);
    expiry.unref();
    this.tasks.set(task.taskId, { task: { ...task }, expiry });
    return true;
  }

  async get(tenant: string, taskId: string): Promise<TaskRecord | undefined> {
    const entry = this.tasks.get(taskId);
    return entry && entry.task.tenant === tenant ? structuredClone(entry.task) : undefined;
  }

  async note(taskId: string, statusMessage: string): Promise<void> {
    const task = this.tasks.get(taskId)?.task;
    if (task?.status !== 'working') return;
    task.statusMessage = statusMessage;
    task.lastUpdatedAt = this.now();
  }

  async finish(taskId: string, outcome: TaskOutcome): Promise<void> {
    const task = this.tasks.get(taskId)?.task;
    if (task?.status !== 'working') return;
    if ('result' in outcome) {
      task.status = 'completed';
      task.result = outcome.result;
    } else {
      task.status = 'failed';
      task.error = outcome.error;
      task.statusMessage = outcome.error.message;
    }
    task.lastUpdatedAt = this.now();
  }

  async cancel(tenant: string, taskId: string): Promise<TaskRecord | undefined> {
    const task = this.tasks.get(taskId)?.task;
    if (!task || task.tenant !== tenant) return undefined;
    if (task.status === 'working') {
      task.status = 'cancelled';
      task.statusMessage = 'The task was cancelled by request.';
      task.lastUpdatedAt = this.now();
    }
    return structuredClone(task);
  }

  async list(tenant: string, cursor: string | undefined, limit: number): Promise<TaskPage> {
    const mine = [...this.tasks.values()].map((e) => e.task).filter((t) => t.tenant === tenant);
    mine.sort((a, b) => b.createdAt - a.createdAt || (a.taskId < b.taskId ? -1 : 1));
    const start = cursor === undefined ? 0 : Number(cursor);
    if (!Number.isSafeInteger(start) || start < 0 || String(start) !== (cursor ?? '0')) throw new BadCursor('invalid cursor');
    const tasks = mine.slice(start, start + limit).map((t) => structuredClone(t));
    return start + limit < mine.length ? { tasks, nextCursor: String(start + limit) } : { tasks };
  }
}
