/**
 * The gateway side of the BullMQ bus: puts calls on their tenant's shard queue and waits for the
 * reply on this process's reply channel. Each call's waiting is bounded by its CallTimer (the one
 * deadline owner on this side, which also carries its start-by check and enqueue timeout); the
 * watchdog (bullmq-watchdog.ts) catches a job lost, stalled or answered into the void.
 *
 * Busy, not missing: at a call's start-by, a job still waiting fails Unavailable only when no
 * executor consumes its shard; behind busy executors it keeps its place until its deadline, its
 * start-by moved on (in the job too, so the executor's never-start-late check agrees).
 *
 * Redis down: calls fail at once (Unavailable) on a fail-fast connection; calls in flight are
 * given up after `outageFailMs` and withdrawn when Redis is back.
 */
import type { Logger } from '../log';
import { ErrorCode, ProtocolError } from '../protocol/errors';
import type { ToolResult } from '../tools/tool';
import type { CallOptions, ToolCallJob } from './bus';
import { Job, type Queue } from './bullmq-classes';
import { BullMqTuning, BUS_DOWN, JobData, NOT_STARTED, startByMargin, unavailable } from './bullmq-terms';
import { probeError, probeJobs } from './bullmq-watchdog';
import { CallTimer } from './call-timer';
import { argumentShape } from './events';
import { type RedisClient, withTimeout } from './redis-connections';
import type { RedisEvents } from './redis-events';
import { CANCEL_CHANNEL, decodeProgress, decodeReply, Outcome, shardOf } from './redis-wire';

interface Pending {
  job: ToolCallJob;
  queue: Queue<JobData>;
  queuedAt: number;
  timer: CallTimer;
  /** Resolves true once BullMQ holds the job, false if the enqueue failed. */
  added: Promise<boolean>;
  enqueued: boolean;
  /** Consecutive watchdog probes that found the job lost, stalled or finished without a reply. */
  strikes: number;
  finish(outcome: Outcome): boolean;
  onProgress?: ((message: string) => void) | undefined;
}

export interface ProducerDeps {
  cmd: RedisClient;
  events: RedisEvents;
  /** One queue per shard. */
  queues: ReadonlyArray<Queue<JobData>>;
  replyChannel: string;
  queueTimeoutMs: number;
  tuning: Readonly<BullMqTuning>;
  log: Logger;
}

export class BullMqProducer {
  private readonly pending = new Map<string, Pending>();
  /** Calls given up while Redis was down: withdrawn (removed or cancelled) when it is back. */
  private readonly orphans = new Set<Pending>();
  private readonly watchdog: NodeJS.Timeout;
  private probing = false;
  private downSince: number | undefined;
  private closed = false;

  constructor(private readonly deps: ProducerDeps) {
    this.watchdog = setInterval(() => void this.probe(), deps.tuning.watchdogIntervalMs);
    this.watchdog.unref();
  }

  call(job: ToolCallJob, signal: AbortSignal, options: CallOptions = {}): Promise<ToolResult> {
    const refusal = this.refusal(job, signal);
    if (refusal) {
      options.timer?.stop();
      return Promise.reject(refusal);
    }
    const { tuning } = this.deps;
    const queue = this.deps.queues[shardOf(job.tenant, this.deps.queues.length)]!;
    return new Promise<ToolResult>((resolve, reject) => {
      const onAbort = () => this.giveUp(p, cancelled(signal));
      const queuedAt = Date.now();
      const timedOut = () => this.giveUp(p, new ProtocolError(ErrorCode.Timeout, `Timeout: ${job.tool} did not finish before its deadline`));
      const startCheck = { at: job.startBy - startByMargin(job.startBy - queuedAt), fn: () => void this.checkStarted(p) };
      const enqueueCheck = {
        at: queuedAt + tuning.enqueueTimeoutMs,
        fn: () => {
          if (!p.enqueued) this.giveUp(p, unavailable('the bus (Redis) did not take the call in time'));
        },
      };
      const timer = options.timer ?? new CallTimer(job.deadline, timedOut, startCheck, enqueueCheck);
      if (options.timer) {
        timer.endWith(timedOut);
        timer.at(startCheck.at, startCheck.fn);
        timer.at(enqueueCheck.at, enqueueCheck.fn);
      }
      const p: Pending = {
        job,
        queue,
        queuedAt,
        timer,
        added: Promise.resolve(false),
        enqueued: false,
        strikes: 0,
        onProgress: options.onProgress,
        finish: (outcome) => {
          if (this.pending.get(job.id) !== p) return false;
          this.pending.delete(job.id);
          timer.stop();
          signal.removeEventListener('abort', onAbort);
          if ('error' in outcome) reject(outcome.error);
          else resolve(outcome.result);
          return true;
        },
      };
      this.pending.set(job.id, p);
      signal.addEventListener('abort', onAbort, { once: true });
      this.deps.events.publish({ type: 'job.enqueued', jobId: job.id, tenant: job.tenant, tool: job.tool, at: queuedAt, args: argumentShape(job.args) });
      p.added = queue.add(job.tool, { call: job, reply: this.deps.replyChannel }, { jobId: job.id }).then(
        () => (p.enqueued = true),
        (err: Error) => {
          this.deps.log.warn({ err: err.message, jobId: job.id }, 'could not enqueue a call');
          this.fail(p, unavailable(BUS_DOWN));
          return false;
        },
      );
    });
  }

  async abort(jobId: string, tenant: string): Promise<void> {
    const queue = this.deps.queues[shardOf(tenant, this.deps.queues.length)]!;
    // Not started yet: take it off the queue. Started (or about to be): every executor hears it.
    if (!(await this.deps.cmd.hget(queue.toKey(jobId), 'processedOn')) && (await queue.remove(jobId)) === 1) return;
    await this.deps.cmd.publish(CANCEL_CHANNEL, jobId);
  }

  /** A message on this process's reply channel: a progress line or a call's outcome. */
  onReply(message: string): void {
    const progress = decodeProgress(message);
    if (progress) return this.pending.get(progress.id)?.onProgress?.(progress.message);
    const reply = decodeReply(message);
    const p = reply && this.pending.get(reply.id);
    if (!reply || !p) return;
    if (reply.unreported && 'error' in reply.outcome) this.fail(p, reply.outcome.error);
    else p.finish(reply.outcome);
  }

  /** The command connection went away: calls in flight are given up once it stays away. */
  onDown(): void {
    this.downSince ??= Date.now();
  }

  /** The command connection is back: calls given up meanwhile are withdrawn now. */
  onUp(): void {
    this.downSince = undefined;
    for (const p of this.orphans) {
      this.orphans.delete(p);
      void this.withdraw(p);
    }
  }

  /** Fails every pending call (Unavailable) and withdraws its job, within a second. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.watchdog);
    const withdrawals = [...this.pending.values()].map((p) => {
      p.finish({ error: unavailable('the server is shutting down') });
      return this.withdraw(p);
    });
    await withTimeout(Promise.all(withdrawals), 1000).catch(() => undefined);
  }

  /** Why a call cannot be submitted now; undefined when it can. */
  private refusal(job: ToolCallJob, signal: AbortSignal): ProtocolError | undefined {
    if (this.closed) return unavailable('the bus is closed');
    if (signal.aborted) return cancelled(signal);
    if (this.deps.cmd.status !== 'ready') return unavailable(BUS_DOWN);
    if (this.pending.has(job.id)) return new ProtocolError(ErrorCode.InvalidRequest, 'A call with this id is already in flight');
    return undefined;
  }

  /** Fails a call the executors will report nothing more about, and says so on the event bus. */
  private fail(p: Pending, error: ProtocolError): void {
    if (p.finish({ error })) this.reportFailed(p, error);
  }

  /** job.failed for a call no executor will report on. */
  private reportFailed(p: Pending, error: ProtocolError): void {
    const now = Date.now();
    this.deps.events.publish({
      type: 'job.failed',
      jobId: p.job.id,
      tenant: p.job.tenant,
      tool: p.job.tool,
      at: now,
      durationMs: now - p.queuedAt,
      code: error.code,
      reason: error.message,
    });
  }

  /** The caller stops waiting now; the job is withdrawn (or its executor told) in the background. */
  private giveUp(p: Pending, error: ProtocolError): void {
    if (!p.finish({ error })) return;
    void this.withdraw(p).then((outcome) => {
      if (outcome === 'removed') this.reportFailed(p, error);
    });
  }

  /** Removes a job nobody started; tells the executors to abort one that did. */
  private async withdraw(p: Pending): Promise<'removed' | 'cancelled' | 'none'> {
    if (!(await p.added)) return 'none';
    const { cmd } = this.deps;
    if (cmd.status !== 'ready') {
      if (!this.closed) this.orphans.add(p);
      return 'none';
    }
    try {
      if (!(await cmd.hget(p.queue.toKey(p.job.id), 'processedOn')) && (await p.queue.remove(p.job.id)) === 1) return 'removed';
      await cmd.publish(CANCEL_CHANNEL, p.job.id);
      return 'cancelled';
    } catch {
      if (!this.closed) this.orphans.add(p);
      return 'none';
    }
  }

  /**
   * Shortly before start-by: a job still waiting behind busy executors gets a later start-by;
   * with no executor on its shard it is removed at start-by and the call fails Unavailable.
   */
  private async checkStarted(p: Pending): Promise<void> {
    if (!(await p.added) || !this.pending.has(p.job.id)) return;
    const { cmd, queueTimeoutMs, replyChannel } = this.deps;
    try {
      if (await cmd.hget(p.queue.toKey(p.job.id), 'processedOn')) return;
      // The worker registry is CLIENT LIST: a Redis that forbids it answers "unknown", and the
      // call then fails at start-by as if no executor were there (the behaviour before).
      const executors = p.job.startBy < p.job.deadline ? await p.queue.getWorkersCount().catch(() => 0) : 0;
      if (executors > 0) {
        const startBy = Math.min(p.job.deadline, Date.now() + queueTimeoutMs);
        const call: ToolCallJob = { ...p.job, startBy };
        // Fails only if the job is gone (started and finished, or lost): the watchdog tells which.
        await new Job<JobData>(p.queue, call.tool, { call, reply: replyChannel }, {}, call.id).updateData({ call, reply: replyChannel }).catch(() => undefined);
        p.job = call;
        p.timer.at(startBy - startByMargin(queueTimeoutMs), () => void this.checkStarted(p));
        return;
      }
      p.timer.at(p.job.startBy, () => void this.removeUnstarted(p));
    } catch {
      // Redis went away: nothing can start the job now or later (executors check start-by).
      this.fail(p, unavailable(BUS_DOWN));
    }
  }

  /** At start-by with no executor: a job still waiting is removed and the call fails Unavailable. */
  private async removeUnstarted(p: Pending): Promise<void> {
    if (!this.pending.has(p.job.id)) return;
    try {
      if (await this.deps.cmd.hget(p.queue.toKey(p.job.id), 'processedOn')) return;
      // remove refuses (0) a job an executor holds the lock of: it has started after all.
      if ((await p.queue.remove(p.job.id)) === 1) this.fail(p, unavailable(NOT_STARTED));
    } catch {
      this.fail(p, unavailable(BUS_DOWN));
    }
  }

  /** The watchdog: detects calls whose executor died, whose job Redis lost, or whose reply got lost. */
  private async probe(): Promise<void> {
    if (this.probing || this.pending.size === 0) return;
    const now = Date.now();
    const { cmd, tuning } = this.deps;
    if (cmd.status !== 'ready') {
      if (this.downSince !== undefined && now - this.downSince >= tuning.outageFailMs) {
        for (const p of [...this.pending.values()]) {
          this.fail(p, unavailable('lost the connection to the bus (Redis) while the call was in flight; it may or may not have run'));
          this.orphans.add(p);
        }
      }
      return;
    }
    const old = [...this.pending.values()].filter((p) => p.enqueued && now - p.queuedAt >= tuning.watchdogIntervalMs);
    if (old.length === 0) return;
    this.probing = true;
    try {
      const states = await probeJobs(
        cmd,
        old.map((p) => p.queue.toKey(p.job.id)),
      );
      old.forEach((p, i) => {
        const state = states[i] ?? 'ok';
        p.strikes = state === 'ok' ? 0 : p.strikes + 1;
        // Twice in a row: a reply published just before the probe may still be on its way.
        if (p.strikes >= 2) this.fail(p, probeError(state));
      });
    } catch (err) {
      this.deps.log.debug({ err: (err as Error).message }, 'watchdog probe failed');
    } finally {
      this.probing = false;
    }
  }
}

function cancelled(signal: AbortSignal): ProtocolError {
  return signal.reason instanceof ProtocolError ? signal.reason : new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
}
