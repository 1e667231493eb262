/**
 * Where tasks live (MCP tasks: the 2026-07-28 extension and 2025-11-25's task-augmented calls).
 * A task is a tool call whose caller got a handle instead of waiting; the store keeps its status,
 * newest status line and, once it ends, its result or JSON-RPC error, until its TTL passes.
 * Every read is scoped to the tenant that created the task: another identity's id looks exactly
 * like an unknown one. Two implementations pass one contract suite (test/contracts/):
 * in memory (stdio, the embedded bus: tasks live in the process) and Redis (durable, answered by
 * every gateway replica; with BullMQ the task id is the job id).
 */
import type { JsonRpcErrorObject } from '../protocol/errors';
import type { ToolResult } from '../tools/tool';

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
export const TERMINAL: ReadonlySet<TaskStatus> = new Set(['completed', 'failed', 'cancelled']);

export interface TaskRecord {
  taskId: string;
  tenant: string;
  tool: string;
  status: TaskStatus;
  statusMessage?: string;
  /** Epoch milliseconds. */
  createdAt: number;
  lastUpdatedAt: number;
  ttlMs: number;
  pollIntervalMs: number;
  /** Present once `completed`: what the call would have returned. */
  result?: ToolResult;
  /** Present once `failed`: the JSON-RPC error the call ended with. */
  error?: JsonRpcErrorObject;
}

export type TaskOutcome = { result: ToolResult } | { error: JsonRpcErrorObject };

export interface TaskPage {
  tasks: TaskRecord[];
  nextCursor?: string;
}

export interface TaskStore {
  /**
   * Creates a `working` task, durably, unless its tenant already has `maxLive` tasks working:
   * then nothing is created and the answer is false.
   */
  create(task: TaskRecord, maxLive: number): Promise<boolean>;
  /** The tenant's task, or undefined (unknown, expired, or another tenant's). */
  get(tenant: string, taskId: string): Promise<TaskRecord | undefined>;
  /** Sets the status line of a working task (the call's newest output line). */
  note(taskId: string, statusMessage: string): Promise<void>;
  /** Ends a working task with its outcome; a task already ended (cancelled, say) keeps its end. */
  finish(taskId: string, outcome: TaskOutcome): Promise<void>;
  /** Marks the tenant's working task cancelled; returns the task as it now is (undefined: unknown). */
  cancel(tenant: string, taskId: string): Promise<TaskRecord | undefined>;
  /** The tenant's tasks, newest first, `limit` per page. */
  list(tenant: string, cursor: string | undefined, limit: number): Promise<TaskPage>;
}

/** A cursor that is not one of ours. */
export class BadCursor extends Error {
  override readonly name = 'BadCursor';
}

export const DEFAULT_MAX_TASK_RESULT_BYTES = 4 * 1024 * 1024;

/** The outcome of a finished call, as a task keeps it; a result too large to keep becomes an error. */
export function outcomeFor(outcome: TaskOutcome, maxResultBytes: number): TaskOutcome {
  if (!('result' in outcome)) return outcome;
  const size = Buffer.byteLength(JSON.stringify(outcome.result));
  if (size <= maxResultBytes) return outcome;
  return {
    error: {
      code: -32007,
      message: `Message too large: the task's result is ${size} bytes, over the limit of ${maxResultBytes} (TOOLGATE_MAX_TASK_RESULT_BYTES)`,
      data: { limit: maxResultBytes },
    },
  };
}
