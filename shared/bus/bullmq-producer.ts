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
 * given up after `outageFailMs` (OutcomeUnknown: they cannot be withdrawn before Redis is back)
 * and withdrawn when it is.
 *
 * Did it run? A call whose answer is lost is told Unavailable (it did not run: safe to retry)
 * only when that is known, else OutcomeUnknown. The proof: an executor starts a tool only after
 * publishing a taken frame on this process's reply channel and hearing Redis deliver it to a
 * subscriber (bullmq-consumer.ts); a job of a plain call heard by no one is refused. So a call
 * whose taken frame never came here never started — whatever Redis lost afterwards. A job that
 * may become a task runs even when its gateway is gone (the task outlives it): while this
 * process's subscriber is down, such calls count as possibly started.
 */
import type { Logger } from '../log';
import { ErrorCode, ProtocolError } from '../protocol/errors';
import type { ToolResult } from '../tools/tool';
import type { CallOptions, ToolCallJob } from './bus';
import { Job, type Queue } from './bullmq-classes';
import { BullMqTuning, BUS_DOWN, JobData, LOST_EXECUTOR_UNSTARTED, noExecutor, NOT_STARTED, outcomeUnknown, startByMargin, unavailable } from './bullmq-terms';
import { probeError, probeJobs } from './bullmq-watchdog';
import { CallTimer } from './call-timer';
import { argumentShape } from './events';
import { type RedisClient, withTimeout } from './redis-connections';
import type { RedisEvents } from './redis-events';
import { CANCEL_CHANNEL, decodeProgress, decodeReply, decodeTaken, Outcome, shardOf } from './redis-wire';

interface Pending {
  job: ToolCallJob;
  queue: Queue<JobData>;
  shard: number;
  queuedAt: number;
  timer: CallTimer;
  /** Resolves true once BullMQ holds the job, false if the enqueue failed. */
  added: Promise<boolean>;
  enqueued: boolean;
  /** The executor was heard taking the job (its taken frame), so the tool may have started. */
  mayHaveRun: boolean;
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
    const shard = shardOf(job.tenant, this.deps.queues.length);
    const queue = this.deps.queues[shard]!;
    return new Promise<ToolResult>((resolve, reject) => {
      const onAbort = () => this.giveUp(p, cancelled(signal));
      const queuedAt = Date.now();
      const timedOut = () => this.giveUp(p, new ProtocolError(ErrorCode.Timeout, `Timeout: ${job.tool} did not finish before its deadline`));
      const startCheck = { at: job.startBy - startByMargin(job.startBy - queuedAt), fn: () => void this.checkStarted(p) };
      const enqueueCheck = {
        at: queuedAt + tuning.enqueueTimeoutMs,
        fn: () => {
          // Still in flight: Redis may queue it yet, and this process can no longer stop it.
          if (!p.enqueued) this.giveUp(p, outcomeUnknown('the bus (Redis) did not confirm taking the call in time; an executor may still run it'));
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
        shard,
        queuedAt,
        timer,
        added: Promise.resolve(false),
        enqueued: false,
        mayHaveRun: false,
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
          if (neverSent(err)) {
            this.fail(p, unavailable(BUS_DOWN));
            return false;
          }
          // The connection dropped with the add on its way: Redis may hold the job, and an
          // executor may take it; it is withdrawn once Redis is back.
          this.fail(p, outcomeUnknown('the connection to the bus (Redis) dropped while it took the call; an executor may still run it'));
          if (!this.closed) this.orphans.add(p);
          return true;
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
    const taken = decodeTaken(message);
    if (taken !== undefined) {
      const p = this.pending.get(taken);
      if (p) p.mayHaveRun = true;
      return;
    }
    const progress = decodeProgress(message);
    if (progress) return this.pending.get(progress.id)?.onProgress?.(progress.message);
    const reply = decodeReply(message);
    const p = reply && this.pending.get(reply.id);
    if (!reply || !p) return;
    if (!reply.unreported || !('error' in reply.outcome)) p.finish(reply.outcome);
    // The executor that failed a dead one's job cannot know whether the tool started; this process can.
    else if (reply.outcome.error.code === ErrorCode.OutcomeUnknown && !p.mayHaveRun) this.fail(p, unavailable(LOST_EXECUTOR_UNSTARTED));
    else this.fail(p, reply.outcome.error);
  }

  /** The command connection went away: calls in flight are given up once it stays away. */
  onDown(): void {
    this.downSince ??= Date.now();
  }

  /**
   * The reply channel's subscriber went away: a task's job runs even when nobody hears its taken
   * frame, so from now on each such call may have run without this process knowing.
   */
  onSubscriberDown(): void {
    for (const p of this.pending.values()) if (p.job.taskId !== undefined) p.mayHaveRun = true;
  }

  /** The command connection is back: calls given up meanwhile are withdrawn now. */
  onUp(): void {
    this.downSince = undefined;
    for (const p of this.orphans) {
      this.orphans.delete(p);
      void this.withdraw(p);
    }
  }

  /**
   * Withdraws every pending call's job and fails the call, within about a second: Unavailable
   * when its job was removed unstarted (or never queued), else OutcomeUnknown (it is cancelled,
   * but its tool may have started).
   */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.watchdog);
    const calls = [...this.pending.values()];
    const outcomes = new Map<Pending, 'removed' | 'cancelled' | 'none'>();
    const withdrawals = calls.map((p) => this.withdraw(p).then((outcome) => void outcomes.set(p, outcome)));
    await withTimeout(Promise.all(withdrawals), 1000).catch(() => undefined);
    for (const p of calls) {
      const outcome = outcomes.get(p);
      const unstarted = outcome === 'removed' || (outcome === 'none' && !p.enqueued && !p.mayHaveRun);
      p.finish({
        error: unstarted
          ? unavailable('the server is shutting down; the call did not run')
          : outcomeUnknown('the server is shutting down; the call was cancelled, and its tool may have run'),
      });
    }
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
      const executors = p.job.startBy < p.job.deadline ? await p.queue.getWorkersCount().catch(() => -1) : -1;
      if (executors > 0) {
        const startBy = Math.min(p.job.deadline, Date.now() + queueTimeoutMs);
        const call: ToolCallJob = { ...p.job, startBy };
        // Fails only if the job is gone (started and finished, or lost): the watchdog tells which.
        await new Job<JobData>(p.queue, call.tool, { call, reply: replyChannel }, {}, call.id).updateData({ call, reply: replyChannel }).catch(() => undefined);
        p.job = call;
        p.timer.at(startBy - startByMargin(queueTimeoutMs), () => void this.checkStarted(p));
        return;
      }
      p.timer.at(p.job.startBy, () => void this.removeUnstarted(p, executors === 0 ? noExecutor(p.shard) : NOT_STARTED));
    } catch {
      // Redis went away: the watchdog answers the call (it may yet be taken before start-by).
    }
  }

  /** At start-by with no executor: a job still waiting is removed and the call fails Unavailable. */
  private async removeUnstarted(p: Pending, why: string): Promise<void> {
    if (!this.pending.has(p.job.id)) return;
    try {
      if (await this.deps.cmd.hget(p.queue.toKey(p.job.id), 'processedOn')) return;
      // remove refuses (0) a job an executor holds the lock of: it has started after all.
      if ((await p.queue.remove(p.job.id)) === 1) this.fail(p, unavailable(why));
    } catch {
      // Past start-by no executor starts it (each checks start-by before taking it on).
      if (!p.mayHaveRun) this.fail(p, unavailable(BUS_DOWN));
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
          // Not heard taken is not enough here: until Redis is back the job cannot be withdrawn,
          // and an executor that still reaches Redis may take it after this answer.
          const said = p.mayHaveRun
            ? 'while an executor ran the call; it may have run'
            : 'before an executor was heard taking the call; it cannot be withdrawn now, so one may still run it';
          this.fail(p, outcomeUnknown(`lost the connection to the bus (Redis) ${said}`));
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
        if (p.strikes >= 2) this.fail(p, probeError(state, p.mayHaveRun));
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

/** ioredis refuses a command on a fail-fast connection that is not up, without sending it. */
function neverSent(err: Error): boolean {
  return /enableOfflineQueue/.test(err.message);
}
