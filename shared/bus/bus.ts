/**
 * The bus between toolgate's modules, as each side uses it: the gateway submits tool calls and
 * waits for their results (`CallBus`); executors take them and run them (`JobSource`); both
 * publish and follow lifecycle events (`BusEvents`). Two implementations pass one contract suite
 * (test/contracts/): in-process (the embedded default, no Redis) and BullMQ on Redis
 * (`bullmq*.ts`, the only files that use bullmq). The composition root opens a `Bus` (both
 * sides), hands each module only its side, and closes it.
 *
 * Deadlines: one owner per side of a call.
 * - Gateway side: the call's `CallTimer` (call-timer.ts). The gateway's runner makes it when a
 *   call must wait for its tenant's admission and hands it to `call`; else `call` makes it. It
 *   bounds all the caller's waiting: Timeout at `job.deadline`, whatever the executor does.
 * - Executor side: the job handler (executor/job-handler.ts) refuses a job past its deadline or
 *   start-by and arms the one timer that aborts a running job at its deadline, through the job's
 *   `JobControl`, so a bus that fails to abort cannot let a job run on. A bus arms no timer for
 *   a running job; it aborts the control when the caller cancels or gives up, and at shutdown.
 */
import type { Permission } from '../auth/permissions';
import type { ToolResult } from '../tools/tool';
import type { TaskStore } from '../tasks/task-store';
import type { TraceContext } from '../trace';
import type { CallTimer } from './call-timer';
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
   * the task with its outcome in `CallBus.tasks` (when a task was made of it), so the task ends
   * even if the gateway that made it is gone. The task id is the job id.
   */
  taskId?: string;
}

/**
 * One running job's cancellation, made by the bus for that job alone, so its handler may abort
 * it too (at the job's deadline, at shutdown) instead of making a second signal that follows it:
 * on Node 20 an AbortSignal costs 5–13 µs and each listener pair as much again. An
 * AbortController is one.
 */
export interface JobControl {
  readonly signal: AbortSignal;
  abort(reason: unknown): void;
}

/**
 * What runs a job on the executor side. Resolves with the tool result; rejects with a
 * ProtocolError. `onProgress` is given when the caller asked for progress (`job.progress`).
 */
export type JobHandler = (job: ToolCallJob, control: JobControl, onProgress?: (message: string) => void) => Promise<ToolResult>;

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

/** The modules' event channel, on both sides. */
export interface BusEvents {
  /** Fire-and-forget; delivered to every subscriber in every process on this bus. */
  publish(event: BusEvent): void;
  /** Returns an unsubscribe function. */
  subscribe(listener: (event: BusEvent) => void): () => void;
}

export interface CallOptions {
  /** Receives the running job's newest output line (the job carries `progress: true`). */
  onProgress?: ((message: string) => void) | undefined;
  /** The call's deadline owner, when the caller made it already (see above); the bus stops it when the call settles. */
  timer?: CallTimer | undefined;
}

/** The gateway's side. */
export interface CallBus extends BusEvents {
  /**
   * Submits a call and resolves with its result. Rejects with a ProtocolError: Timeout when
   * `job.deadline` passes; when the bus or the executor fails, Unavailable if the tool surely did
   * not start (safe to retry) and OutcomeUnknown if it may have (an executor that died mid-job,
   * a lost job it had taken, a shutdown that stopped it) — a job is never run a second time;
   * Cancelled when `signal` aborts (the job is withdrawn or aborted on the executor).
   */
  call(job: ToolCallJob, signal: AbortSignal, options?: CallOptions): Promise<ToolResult>;
  /**
   * Stops a call wherever it is (queued: withdrawn; running: aborted, its process group killed),
   * from any process on the bus: how a task is cancelled through another gateway.
   */
  abort(jobId: string, tenant: string): Promise<void>;
  /** Tasks, shared by every process on this bus (in memory for the in-process bus). */
  readonly tasks: TaskStore;
  readonly revocations: Revocations;
  /** Whether the bus can take calls now. */
  ready(): Promise<boolean>;
  /**
   * Why calls cannot be served now, for /readyz; undefined when they can. Beyond `ready()`, on
   * Redis: a shard no executor consumes (its calls could only fail), looked up at most once a
   * second, so a probe stays cheap. A lookup Redis refuses (CLIENT LIST) counts as served.
   */
  unready(): Promise<string | undefined>;
}

export interface ConsumeOptions {
  /** Jobs run at once, at most. */
  concurrency: number;
  /**
   * The id of the executor's data directory (executor/workspaces.ts). On Redis, shards spread
   * over the live executors, and one is handed over to another executor only when both have the
   * same: the tenants that move with it find their workspaces there. In-process: unused.
   */
  dataDirId?: string;
  /**
   * On Redis, a shard handed over to another executor: called once its running calls finished
   * and before its lease is returned, with what picks the shard's tenants, to stop what this
   * executor keeps for them (their sandboxes), so the next owner never shares a workspace with it.
   */
  onHandOver?(moved: (tenant: string) => boolean): Promise<void>;
}

/** The executor's side. */
export interface JobSource extends BusEvents {
  /** Runs `handler` for jobs, up to `concurrency` at once. */
  consume(handler: JobHandler, options: ConsumeOptions): Promise<Consumer>;
}

/** Both sides, as the composition root opens and closes it. */
export interface Bus extends CallBus, JobSource {
  close(): Promise<void>;
}
