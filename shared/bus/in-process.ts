/**
 * The embedded bus: gateway and executor in one process, no Redis. Same contract as BullMQ:
 * deadlines, start-by, cancellation, never running a job twice, and lifecycle events delivered
 * asynchronously (as a real bus would) to every subscriber.
 *
 * A free slot goes to the waiting job whose tenant started a job least recently (round-robin
 * over tenants, arrival order within one), so a tenant with many queued jobs does not hold the
 * others back. Start-by fails a call only when no consumer is there to start it: behind a busy
 * consumer a call waits for a slot until its deadline.
 */
import type { Logger } from '../log';
import { ErrorCode, ProtocolError, toErrorObject } from '../protocol/errors';
import { MemoryTaskStore } from '../tasks/memory-store';
import { DEFAULT_MAX_TASK_RESULT_BYTES, outcomeFor, TaskStore } from '../tasks/task-store';
import type { ToolResult } from '../tools/tool';
import type { Bus, CallOptions, ConsumeOptions, Consumer, JobHandler, Revocations, ToolCallJob } from './bus';
import { CallTimer } from './call-timer';
import { argumentShape, BusEvent } from './events';

interface Waiting {
  job: ToolCallJob;
  controller: AbortController;
  resolve(result: ToolResult): void;
  reject(err: Error): void;
  started: boolean;
  /** The caller's progress sink, silenced once the call has settled. */
  onProgress?: (message: string) => void;
  /** Settles once the handler has returned or thrown (only for started entries). */
  done?: Promise<void>;
}

interface InProcessWorker {
  handler: JobHandler;
  concurrency: number;
  running: Set<Waiting>;
  closed: boolean;
}

export class InProcessBus implements Bus {
  private readonly queue: Waiting[] = [];
  private readonly listeners = new Set<(event: BusEvent) => void>();
  private worker: InProcessWorker | undefined;
  /** When each tenant last had a job started (round-robin order); forgotten once it has none waiting. */
  private readonly lastStart = new Map<string, number>();
  private starts = 0;
  private closed = false;
  readonly revocations: Revocations;
  readonly tasks: TaskStore;

  constructor(
    private readonly log?: Logger,
    private readonly maxTaskResultBytes = DEFAULT_MAX_TASK_RESULT_BYTES,
  ) {
    this.tasks = new MemoryTaskStore();
    const revoked = new Map<string, number>();
    this.revocations = {
      revoke: async (id, notBefore) => {
        revoked.set(id, Math.max(notBefore, revoked.get(id) ?? 0));
        this.publish({ type: 'token.revoked', id, notBefore, at: Date.now() });
      },
      notBefore: (id) => revoked.get(id),
    };
  }

  call(job: ToolCallJob, signal: AbortSignal, options: CallOptions = {}): Promise<ToolResult> {
    if (this.closed) {
      options.timer?.stop();
      return Promise.reject(new ProtocolError(ErrorCode.Unavailable, 'Unavailable: the bus is closed'));
    }
    if (signal.aborted) {
      options.timer?.stop();
      return Promise.reject(cancelledBy(signal));
    }
    return new Promise<ToolResult>((resolve, reject) => {
      const controller = new AbortController();
      let settled = false;
      const finish = () => {
        settled = true;
        timer.stop();
        signal.removeEventListener('abort', onAbort);
        const i = this.queue.indexOf(entry);
        if (i !== -1) this.queue.splice(i, 1);
      };
      const queuedAt = Date.now();
      const entry: Waiting = {
        job,
        controller,
        started: false,
        resolve: (r) => (finish(), resolve(r)),
        reject: (e) => (finish(), reject(e)),
      };
      const { onProgress } = options;
      if (onProgress) entry.onProgress = (message) => void (settled || onProgress(message));
      const fail = (err: ProtocolError) => {
        // A queued call no executor started ends here; a started one reports its own outcome.
        if (!entry.started && this.queue.includes(entry))
          this.publish({
            type: 'job.failed',
            jobId: job.id,
            tenant: job.tenant,
            tool: job.tool,
            at: Date.now(),
            durationMs: Date.now() - queuedAt,
            code: err.code,
            reason: err.message,
          });
        controller.abort(err);
        entry.reject(err);
      };
      const checkStarted = () => {
        if (entry.started) return;
        // A busy pool is not a missing one: the call keeps its place until its deadline, and
        // its start-by moves on so the executor's own check (never start late) agrees.
        if (this.worker && !this.worker.closed) {
          const startBy = Math.min(job.deadline, Date.now() + Math.max(1, job.startBy - queuedAt));
          entry.job = { ...entry.job, startBy };
          timer.at(startBy, checkStarted);
          return;
        }
        fail(new ProtocolError(ErrorCode.Unavailable, 'Unavailable: no executor started the call in time; it did not run'));
      };
      const timedOut = () => fail(new ProtocolError(ErrorCode.Timeout, `Timeout: ${job.tool} did not finish before its deadline`));
      const timer = options.timer ?? new CallTimer(job.deadline, timedOut, { at: job.startBy, fn: checkStarted });
      if (options.timer) {
        timer.endWith(timedOut);
        timer.at(job.startBy, checkStarted);
      }
      const onAbort = () => fail(cancelledBy(signal));
      signal.addEventListener('abort', onAbort, { once: true });
      this.queue.push(entry);
      this.publish({ type: 'job.enqueued', jobId: job.id, tenant: job.tenant, tool: job.tool, at: Date.now(), args: argumentShape(job.args) });
      this.pump();
    });
  }

  async abort(jobId: string): Promise<void> {
    const entry = this.queue.find((e) => e.job.id === jobId) ?? [...(this.worker?.running ?? [])].find((e) => e.job.id === jobId);
    if (!entry) return;
    const err = new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
    entry.controller.abort(err);
    if (!entry.started) entry.reject(err);
  }

  async consume(handler: JobHandler, options: ConsumeOptions): Promise<Consumer> {
    if (this.worker && !this.worker.closed) throw new Error('the in-process bus takes one consumer');
    const worker: InProcessWorker = { handler, concurrency: Math.max(1, options.concurrency), running: new Set(), closed: false };
    this.worker = worker;
    this.pump();
    return {
      close: async (graceMs?: number) => {
        worker.closed = true;
        const done = () => Promise.allSettled([...worker.running].map((e) => e.done));
        if (graceMs !== undefined) {
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([done(), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
          clearTimeout(timer);
          for (const entry of worker.running) entry.controller.abort(stoppedWhileRunning('the executor is shutting down'));
        }
        await done();
      },
    };
  }

  publish(event: BusEvent): void {
    for (const listener of this.listeners) {
      queueMicrotask(() => {
        try {
          listener(event);
        } catch (err) {
          this.log?.error({ err, event: event.type }, 'a bus event listener threw');
        }
      });
    }
  }

  subscribe(listener: (event: BusEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async ready(): Promise<boolean> {
    return !this.closed;
  }

  async unready(): Promise<string | undefined> {
    return this.closed ? 'the bus is closed' : undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const entry of [...this.queue]) {
      // Only a call no executor started is safe to retry.
      const err = entry.started
        ? stoppedWhileRunning('the server is shutting down')
        : new ProtocolError(ErrorCode.Unavailable, 'Unavailable: the server is shutting down; the call did not run');
      entry.controller.abort(err);
      entry.reject(err);
    }
  }

  private pump(): void {
    const worker = this.worker;
    if (!worker || worker.closed) return;
    while (worker.running.size < worker.concurrency) {
      const entry = this.next();
      if (!entry) return;
      entry.started = true;
      this.lastStart.set(entry.job.tenant, ++this.starts);
      // Its start-by timer may not have run yet: the job starts now, in time by definition.
      if (Date.now() > entry.job.startBy) entry.job = { ...entry.job, startBy: Math.min(entry.job.deadline, Date.now() + 1000) };
      worker.running.add(entry);
      entry.done = this.run(worker, entry).finally(() => {
        worker.running.delete(entry);
        this.pump();
      });
    }
  }

  /** The waiting job of the tenant served least recently (a tenant never served counts as first). */
  private next(): Waiting | undefined {
    let best: Waiting | undefined;
    let bestTurn = Infinity;
    for (const e of this.queue) {
      if (e.started) continue;
      const turn = this.lastStart.get(e.job.tenant) ?? 0;
      if (turn < bestTurn) {
        best = e;
        bestTurn = turn;
        if (turn === 0) break;
      }
    }
    if (this.lastStart.size > 4096) {
      const waiting = new Set(this.queue.map((e) => e.job.tenant));
      for (const tenant of this.lastStart.keys()) if (!waiting.has(tenant)) this.lastStart.delete(tenant);
    }
    return best;
  }

  private async run(worker: { handler: JobHandler }, entry: Waiting): Promise<void> {
    const { job } = entry;
    const started = Date.now();
    const base = { jobId: job.id, tenant: job.tenant, tool: job.tool, ...(job.trace ? { trace: job.trace } : {}) };
    this.publish({ type: 'job.started', ...base, at: started });
    try {
      const result = await worker.handler(job, entry.controller, entry.onProgress);
      this.publish({ type: 'job.completed', ...base, at: Date.now(), durationMs: Date.now() - started, isError: result.isError === true });
      if (job.taskId) await this.tasks.finish(job.taskId, outcomeFor({ result }, this.maxTaskResultBytes));
      entry.resolve(result);
    } catch (err) {
      const e = err instanceof ProtocolError ? err : new ProtocolError(ErrorCode.InternalError, 'Internal error');
      if (!(err instanceof ProtocolError)) this.log?.error({ err, tool: job.tool }, 'a job handler threw a non-protocol error');
      this.publish({ type: 'job.failed', ...base, at: Date.now(), durationMs: Date.now() - started, code: e.code, reason: e.message });
      if (job.taskId) await this.tasks.finish(job.taskId, { error: toErrorObject(e) });
      entry.reject(e);
    }
  }
}

/** Why a caller's signal aborted: its own ProtocolError reason (a deadline, a shutdown), else Cancelled. */
function cancelledBy(signal: AbortSignal): ProtocolError {
  return signal.reason instanceof ProtocolError ? signal.reason : new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
}

/** A running call stopped before its end: its tool may have done part of its work. */
function stoppedWhileRunning(why: string): ProtocolError {
  return new ProtocolError(ErrorCode.OutcomeUnknown, `Outcome unknown: ${why}; the call was stopped while it ran, and may have run in part`);
}
