/**
 * The bus between toolgate's modules. The gateway submits tool calls and waits for their
 * results; executors consume them; every module publishes lifecycle events and reads token
 * revocations through it. Two implementations pass one contract suite (test/contracts/):
 * in-process (the embedded default, no Redis) and BullMQ on Redis (`bullmq.ts`, the only file
 * that imports bullmq).
 */
import type { Permission } from '../auth/permissions';
import type { ToolResult } from '../tools/tool';
import type { TaskStore } from '../tasks/task-store';
import type { TraceContext } from '../trace';
import type { BusEvent } from './events';

/** One tools/call on its way to an executor. Arguments are already validated by the gateway. */
export interface ToolCallJob {
  /** Unique per call; the key for replies, cancellation and events. */
  id: string;
  /** The caller's identity (the token's `id`): the tenant whose sandbox runs the call. */
  tenant: string;
  /** The caller's permissions, for the executor's own defence-in-depth check. */
  permissions: readonly Permission[];
  tool: string;
  args: unknown;
  /** Epoch milliseconds after which nobody waits for the result: the job must not start after it. */
  deadline: number;
  /** Epoch milliseconds by which an executor must have started the job; after it the call fails Unavailable. */
  startBy: number;
  /** The caller's W3C trace context, so the executor's audit line joins the caller's trace. */
  trace?: TraceContext;
  /** The caller wants the tool's progress lines while it runs (sent back beside the reply). */
  progress?: boolean;
  /**
   * Set when the call may become a task (the caller declared tasks): whoever runs the job ends
   * the task with its outcome in `Bus.tasks` (when a task was made of it), so the task ends even
   * if the gateway that made it is gone. The task id is the job id.
   */
  taskId?: string;
}

/**
 * What runs a job on the executor side. Resolves with the tool result; rejects with a
 * ProtocolError. `onProgress` is given when the caller asked for progress (`job.progress`).
 */
export type JobHandler = (job: ToolCallJob, signal: AbortSignal, onProgress?: (message: string) => void) => Promise<ToolResult>;

/**
 * The signal a bus gives a job's handler, made by `jobController`: the bus makes one per job and
 * shares it with nobody else, so the handler may abort it too (at the job's deadline, at
 * shutdown) instead of making a second signal that follows it. On Node 20 making an AbortSignal
 * costs 5–13 µs and each listener pair as much again: per job, on the hot path of every call.
 */
const jobAborters = new WeakMap<AbortSignal, (reason: unknown) => void>();

/** A controller whose signal its job's handler may abort (see `aborterOf`). */
export function jobController(): AbortController {
  const controller = new AbortController();
  jobAborters.set(controller.signal, (reason) => controller.abort(reason));
  return controller;
}

/** How to abort `signal` if a bus made it for one job with `jobController`; else undefined. */
export function aborterOf(signal: AbortSignal): ((reason: unknown) => void) | undefined {
  return jobAborters.get(signal);
}

export interface Consumer {
  /** Stops taking jobs; running ones finish (or are aborted after `graceMs`). */
  close(graceMs?: number): Promise<void>;
}

/** Token revocation: every token of `id` issued before `notBefore` (epoch seconds) is invalid. */
export interface Revocations {
  revoke(id: string, notBeforeSeconds: number): Promise<void>;
  /** Synchronous: answered from a local copy kept current by `token.revoked` events. */
  notBefore(id: string): number | undefined;
}

export interface Bus {
  /**
   * Gateway side: submits a call and resolves with its result. Rejects with a ProtocolError:
   * Timeout when `job.deadline` passes, Unavailable when the bus or the executor fails (an
   * executor that died mid-job included — the job is never run a second time), Cancelled when
   * `signal` aborts (the job is withdrawn or aborted on the executor).
   */
  call(job: ToolCallJob, signal: AbortSignal, onProgress?: (message: string) => void): Promise<ToolResult>;
  /** Executor side: runs `handler` for jobs, up to `concurrency` at once. */
  consume(handler: JobHandler, options: { concurrency: number }): Promise<Consumer>;
  /** Fire-and-forget; delivered to every subscriber in every process on this bus. */
  publish(event: BusEvent): void;
  /** Returns an unsubscribe function. */
  subscribe(listener: (event: BusEvent) => void): () => void;
  readonly revocations: Revocations;
  /** Tasks, shared by every process on this bus (in memory for the in-process bus). */
  readonly tasks: TaskStore;
  /**
   * Stops a call wherever it is (queued: withdrawn; running: aborted, its process group killed),
   * from any process on the bus: how a task is cancelled through another gateway.
   */
  abort(jobId: string, tenant: string): Promise<void>;
  /** Whether the bus can take calls now (for /readyz). */
  ready(): Promise<boolean>;
  close(): Promise<void>;
}
