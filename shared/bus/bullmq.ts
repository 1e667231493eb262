/**
 * The bus on Redis: BullMQ queues carry tool calls from gateways to executors; replies, events
 * and cancellations travel over Redis pub/sub. The only file that uses bullmq (through
 * bullmq-classes.ts, which loads only the classes it needs).
 *
 * Shards and tenant affinity: there are TOOLGATE_SHARDS queues `toolgate-calls-<n>`; a tenant's
 * calls always go to shard fnv1a(tenant) % shards, and an executor consumes the shards in
 * TOOLGATE_EXECUTOR_SHARDS. Give each shard exactly one executor and every tenant's calls reach
 * the one executor holding its sandbox (affinity). The limit: while that executor is down its
 * tenants' calls fail Unavailable once their start-by passes (TOOLGATE_QUEUE_TIMEOUT_MS); an
 * executor taking over the shard starts fresh sandboxes. Several executors on one shard share
 * its load but a tenant may then get a sandbox on each.
 *
 * Replies: the job carries its gateway's reply channel; the executor publishes the outcome there
 * (measured in bench/bus-reply.ts against BullMQ's waitUntilFinished, which is slower because it
 * reads every job's events from a stream).
 *
 * Never twice: attempts 1, maxStalledCount 0 and maxStartedAttempts 1 — a job whose executor
 * died is failed by the next stall check, never re-run. The caller learns it within seconds:
 * the executor that fails the job publishes a reply, and the gateway's own watchdog probes the
 * state of every call older than a second (so it also works when no executor is left).
 *
 * Busy, not missing: at a call's start-by, a job still waiting fails Unavailable only when no
 * executor consumes its shard; behind busy executors it keeps its place until its deadline, its
 * start-by moved on (in the job too, so the executor's never-start-late check agrees). Which
 * tenant's job takes a slot is decided before the job is queued (shared/scheduling).
 *
 * Redis down: calls fail at once (Unavailable) on a fail-fast connection; calls in flight are
 * given up after `outageFailMs` and withdrawn when Redis is back; everything reconnects by itself.
 *
 * Expiry: finished jobs are kept by age and count (`keepCompleted`, `keepFailed`); BullMQ's
 * event stream is capped at 10,000 entries; nothing else is stored per call.
 */
import { randomUUID } from 'node:crypto';
import * as os from 'node:os';
import { Job, Queue, Worker } from './bullmq-classes';
import type { Config } from '../config';
import type { Logger } from '../log';
import { ErrorCode, ProtocolError, toErrorObject } from '../protocol/errors';
import type { ToolResult } from '../tools/tool';
import { jobController, type Bus, type Consumer, type JobHandler, type ToolCallJob } from './bus';
import { argumentShape, BusEvent } from './events';
import { EVENTS_CHANNEL, RedisEvents, RedisRevocations } from './redis-events';
import {
  closeConnection,
  coalesceWrites,
  ConnectionFamily,
  failFastConnection,
  patientConnection,
  RedisClient,
  waitReady,
  watchConnection,
} from './redis-connections';
import { latestWins, LatestWins } from '../latest-wins';
import { RedisTaskStore } from '../tasks/redis-store';
import { outcomeFor, TaskOutcome, TaskStore } from '../tasks/task-store';
import { CANCEL_CHANNEL, decodeProgress, decodeReply, encodeProgress, encodeReply, Outcome, queueName, REPLY_CHANNEL_PREFIX, shardOf } from './redis-wire';

export { queueName, shardOf } from './redis-wire';

export interface BullMqTuning {
  /** A running job's lock; an executor that dies is detected about this long after. */
  lockDurationMs: number;
  /** How often each worker looks for jobs whose lock expired. */
  stalledIntervalMs: number;
  /** How often the gateway probes calls older than this for lost, stalled or unanswered jobs. */
  watchdogIntervalMs: number;
  /** Calls in flight are given up (Unavailable) once Redis has been unreachable this long. */
  outageFailMs: number;
  /** A call whose enqueue gets no answer within this fails Unavailable. */
  enqueueTimeoutMs: number;
  /** `createBullMqBus` fails if Redis is not reachable within this. */
  connectTimeoutMs: number;
  /**
   * Finished jobs kept in Redis: at most `count`, none older than `age` seconds. A job holds the
   * call's arguments (file contents included), so it is not kept long.
   */
  keepCompleted: { age: number; count: number };
  keepFailed: { age: number; count: number };
  /**
   * How long a job lifecycle event waits to leave with others (redis-events.ts): the delay other
   * processes' metrics and audit see, bought by one events message per process per interval
   * instead of three or four per call, each waking every process on the bus.
   */
  eventBatchMs: number;
}

export const DEFAULT_TUNING: Readonly<BullMqTuning> = Object.freeze({
  lockDurationMs: 2000,
  stalledIntervalMs: 1000,
  watchdogIntervalMs: 1000,
  outageFailMs: 3000,
  enqueueTimeoutMs: 3000,
  connectTimeoutMs: 10_000,
  keepCompleted: { age: 60, count: 1000 },
  keepFailed: { age: 3600, count: 1000 },
  eventBatchMs: 50,
});

/** Cancellations that arrive before their job starts are remembered this long. */
const EARLY_CANCEL_MS = 60_000;
const MAX_TIMER_MS = 2 ** 31 - 1;

interface JobData {
  call: ToolCallJob;
  /** The gateway's reply channel. */
  reply: string;
}

interface Pending {
  job: ToolCallJob;
  queue: Queue<JobData>;
  queuedAt: number;
  /** Resolves true once BullMQ holds the job, false if the enqueue failed. */
  added: Promise<boolean>;
  enqueued: boolean;
  /** Consecutive watchdog probes that found the job lost, stalled or finished without a reply. */
  strikes: number;
  finish(outcome: Outcome): boolean;
  onProgress?: (message: string) => void;
  /** Runs `fn` at epoch ms `at` unless the call has finished by then. */
  at(at: number, fn: () => void): void;
}

/** Shortest gap between two progress frames of one job. */
const PROGRESS_GAP_MS = 250;
const unavailable = (message: string) => new ProtocolError(ErrorCode.Unavailable, `Unavailable: ${message}`);
const BUS_DOWN = 'the bus (Redis) is unreachable; try again shortly';
const NOT_STARTED = 'no executor started the call in time';
const LOST_EXECUTOR = 'the executor running this call stopped before it finished; the call is not retried';

/** Lost (no job), stalled (started, lock gone) or finished (reply should have come) — else ok. */
const PROBE_SCRIPT = `
local out = {}
for i = 1, #KEYS, 2 do
  local state = 'ok'
  if redis.call('EXISTS', KEYS[i]) == 0 then state = 'lost'
  else
    local f = redis.call('HMGET', KEYS[i], 'processedOn', 'finishedOn', 'defa')
    if f[2] then state = 'finished'
    elseif f[3] then state = 'stalled'
    elseif f[1] and redis.call('EXISTS', KEYS[i + 1]) == 0 then state = 'stalled' end
  end
  out[#out + 1] = state
end
return out`;

const PROBE_ERRORS: Record<string, string> = {
  lost: 'the bus lost this call (did Redis restart?)',
  stalled: LOST_EXECUTOR,
  finished: 'the call finished but its reply was lost',
};

export async function createBullMqBus(config: Readonly<Config>, log: Logger, tuning: Partial<BullMqTuning> = {}): Promise<BullMqBus> {
  if (!config.bus.redisUrl) throw new Error('the BullMQ bus needs TOOLGATE_REDIS_URL');
  const bus = new BullMqBus(config.bus.redisUrl, config, log.child({ module: 'bus' }), { ...DEFAULT_TUNING, ...tuning });
  try {
    await bus.start();
  } catch (err) {
    await bus.close();
    throw err;
  }
  return bus;
}

export class BullMqBus implements Bus {
  readonly revocations: RedisRevocations;
  readonly tasks: TaskStore;
  private readonly origin = randomUUID();
  private readonly replyChannel = `${REPLY_CHANNEL_PREFIX}${this.origin}`;
  private readonly cmd: RedisClient;
  private readonly sub: RedisClient;
  private readonly events: RedisEvents;
  private readonly queues: Array<Queue<JobData>> = [];
  private readonly pending = new Map<string, Pending>();
  /** Calls given up while Redis was down: withdrawn (removed or cancelled) when it is back. */
  private readonly orphans = new Set<Pending>();
  private readonly consumers = new Set<BullMqConsumer>();
  private watchdog: NodeJS.Timeout | undefined;
  private probing = false;
  private downSince: number | undefined;
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly config: Readonly<Config>,
    private readonly log: Logger,
    private readonly tuning: Readonly<BullMqTuning>,
  ) {
    this.cmd = coalesceWrites(failFastConnection(url, 'toolgate-bus'));
    this.sub = patientConnection(url, 'toolgate-bus-sub');
    watchConnection(this.cmd, 'bus', log);
    watchConnection(this.sub, 'bus-subscriber', log);
    this.events = new RedisEvents(this.cmd, this.origin, log, tuning.eventBatchMs);
    this.revocations = new RedisRevocations(this.cmd, this.events);
    this.tasks = new RedisTaskStore(this.cmd);
  }

  async abort(jobId: string, tenant: string): Promise<void> {
    const queue = this.queues[shardOf(tenant, this.queues.length)]!;
    // Not started yet: take it off the queue. Started (or about to be): every executor hears it.
    if (!(await this.cmd.hget(queue.toKey(jobId), 'processedOn')) && (await queue.remove(jobId)) === 1) return;
    await this.cmd.publish(CANCEL_CHANNEL, jobId);
  }

  async start(): Promise<void> {
    await Promise.all([waitReady(this.cmd, this.url, this.tuning.connectTimeoutMs), waitReady(this.sub, this.url, this.tuning.connectTimeoutMs)]);
    this.sub.on('message', (channel: string, message: string) => this.route(channel, message));
    await this.sub.subscribe(EVENTS_CHANNEL, this.replyChannel);
    for (let shard = 0; shard < this.config.bus.shards; shard++) {
      const queue = new Queue<JobData>(queueName(shard), {
        connection: this.cmd,
        defaultJobOptions: { attempts: 1, removeOnComplete: this.tuning.keepCompleted, removeOnFail: this.tuning.keepFailed, stackTraceLimit: 0 },
      });
      queue.on('error', (err) => this.log.debug({ err: err.message, queue: queue.name }, 'queue error'));
      this.queues.push(queue);
    }
    await Promise.all(this.queues.map((q) => q.waitUntilReady()));
    await this.revocations.load();
    this.cmd.on('close', () => (this.downSince ??= Date.now()));
    this.cmd.on('ready', () => {
      this.downSince = undefined;
      this.revocations.load().catch((err: Error) => this.log.warn({ err: err.message }, 'could not reload revocations'));
      for (const p of this.orphans) {
        this.orphans.delete(p);
        void this.withdraw(p);
      }
    });
    this.watchdog = setInterval(() => void this.probe(), this.tuning.watchdogIntervalMs);
    this.watchdog.unref();
  }

  call(job: ToolCallJob, signal: AbortSignal, onProgress?: (message: string) => void): Promise<ToolResult> {
    if (this.closed) return Promise.reject(unavailable('the bus is closed'));
    if (signal.aborted) return Promise.reject(cancelled(signal));
    if (this.cmd.status !== 'ready') return Promise.reject(unavailable(BUS_DOWN));
    if (this.pending.has(job.id)) return Promise.reject(new ProtocolError(ErrorCode.InvalidRequest, 'A call with this id is already in flight'));
    const queue = this.queues[shardOf(job.tenant, this.queues.length)]!;
    return new Promise<ToolResult>((resolve, reject) => {
      const onAbort = () => this.giveUp(p, cancelled(signal));
      const p: Pending = {
        job,
        queue,
        queuedAt: Date.now(),
        added: Promise.resolve(false),
        enqueued: false,
        strikes: 0,
        ...(onProgress ? { onProgress } : {}),
        at: (at, fn) => timer.at(at, fn),
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
      const timer = new CallTimer([
        { at: job.deadline, fn: () => this.giveUp(p, new ProtocolError(ErrorCode.Timeout, `Timeout: ${job.tool} did not finish before its deadline`)) },
        { at: job.startBy - startByMargin(job.startBy - p.queuedAt), fn: () => void this.checkStarted(p) },
        {
          at: p.queuedAt + this.tuning.enqueueTimeoutMs,
          fn: () => {
            if (!p.enqueued) this.giveUp(p, unavailable('the bus (Redis) did not take the call in time'));
          },
        },
      ]);
      this.pending.set(job.id, p);
      signal.addEventListener('abort', onAbort, { once: true });
      this.events.publish({ type: 'job.enqueued', jobId: job.id, tenant: job.tenant, tool: job.tool, at: p.queuedAt, args: argumentShape(job.args) });
      p.added = queue.add(job.tool, { call: job, reply: this.replyChannel }, { jobId: job.id }).then(
        () => (p.enqueued = true),
        (err: Error) => {
          this.log.warn({ err: err.message, jobId: job.id }, 'could not enqueue a call');
          this.fail(p, unavailable(BUS_DOWN));
          return false;
        },
      );
    });
  }

  async consume(handler: JobHandler, options: { concurrency: number }): Promise<Consumer> {
    if (this.closed) throw new Error('the bus is closed');
    const { shards } = this.config.bus;
    const owned = this.config.executor.ownedShards === 'all' ? Array.from({ length: shards }, (_, i) => i) : [...new Set(this.config.executor.ownedShards)];
    const outside = owned.find((s) => s >= shards);
    if (outside !== undefined) {
      throw new Error(`TOOLGATE_EXECUTOR_SHARDS names shard ${outside}, but TOOLGATE_SHARDS is ${shards} (shards are 0 to ${shards - 1})`);
    }
    if (owned.length === 0) throw new Error('TOOLGATE_EXECUTOR_SHARDS names no shard');
    // While Redis is down the subscription completes on reconnect; the consumer need not wait.
    if (this.consumers.size === 0) await withTimeout(this.sub.subscribe(CANCEL_CHANNEL), this.tuning.connectTimeoutMs).catch(() => undefined);
    const consumer = new BullMqConsumer({
      url: this.url,
      shards: owned,
      concurrency: Math.max(1, options.concurrency),
      handler,
      events: this.events,
      log: this.log,
      tuning: this.tuning,
      maxTaskResultBytes: this.config.tasks.maxResultBytes,
      onClosed: (c) => this.consumers.delete(c),
    });
    this.consumers.add(consumer);
    return consumer;
  }

  publish(event: BusEvent): void {
    this.events.publish(event);
  }

  subscribe(listener: (event: BusEvent) => void): () => void {
    return this.events.subscribe(listener);
  }

  async ready(): Promise<boolean> {
    if (this.closed || this.cmd.status !== 'ready') return false;
    try {
      await withTimeout(this.cmd.ping(), 1000);
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.watchdog);
    const withdrawals = [...this.pending.values()].map((p) => {
      p.finish({ error: unavailable('the server is shutting down') });
      return this.withdraw(p);
    });
    await withTimeout(Promise.all(withdrawals), 1000).catch(() => undefined);
    await Promise.all([...this.consumers].map((c) => c.close(0)));
    await withTimeout(Promise.all(this.queues.map((q) => q.close())), 2000).catch(() => undefined);
    this.events.flush();
    await Promise.all([closeConnection(this.sub), closeConnection(this.cmd)]);
  }

  private route(channel: string, message: string): void {
    if (channel === this.replyChannel) this.onReply(message);
    else if (channel === EVENTS_CHANNEL) this.events.receive(message);
    else if (channel === CANCEL_CHANNEL) for (const c of this.consumers) c.cancel(message);
  }

  private onReply(message: string): void {
    const progress = decodeProgress(message);
    if (progress) return this.pending.get(progress.id)?.onProgress?.(progress.message);
    const reply = decodeReply(message);
    const p = reply && this.pending.get(reply.id);
    if (!reply || !p) return;
    if (reply.unreported && 'error' in reply.outcome) this.fail(p, reply.outcome.error);
    else p.finish(reply.outcome);
  }

  /** Fails a call the executors will report nothing more about, and says so on the event bus. */
  private fail(p: Pending, error: ProtocolError): void {
    if (p.finish({ error })) this.reportFailed(p, error);
  }

  /** job.failed for a call no executor will report on. */
  private reportFailed(p: Pending, error: ProtocolError): void {
    const now = Date.now();
    this.events.publish({
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
    if (this.cmd.status !== 'ready') {
      if (!this.closed) this.orphans.add(p);
      return 'none';
    }
    try {
      if (!(await this.cmd.hget(p.queue.toKey(p.job.id), 'processedOn')) && (await p.queue.remove(p.job.id)) === 1) return 'removed';
      await this.cmd.publish(CANCEL_CHANNEL, p.job.id);
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
    try {
      if (await this.cmd.hget(p.queue.toKey(p.job.id), 'processedOn')) return;
      // The worker registry is CLIENT LIST: a Redis that forbids it answers "unknown", and the
      // call then fails at start-by as if no executor were there (the behaviour before).
      const executors = p.job.startBy < p.job.deadline ? await p.queue.getWorkersCount().catch(() => 0) : 0;
      if (executors > 0) {
        const startBy = Math.min(p.job.deadline, Date.now() + this.config.bus.queueTimeoutMs);
        const call: ToolCallJob = { ...p.job, startBy };
        // Fails only if the job is gone (started and finished, or lost): the watchdog tells which.
        await new Job<JobData>(p.queue, call.tool, { call, reply: this.replyChannel }, {}, call.id)
          .updateData({ call, reply: this.replyChannel })
          .catch(() => undefined);
        p.job = call;
        p.at(startBy - startByMargin(this.config.bus.queueTimeoutMs), () => void this.checkStarted(p));
        return;
      }
      p.at(p.job.startBy, () => void this.removeUnstarted(p));
    } catch {
      // Redis went away: nothing can start the job now or later (executors check start-by).
      this.fail(p, unavailable(BUS_DOWN));
    }
  }

  /** At start-by with no executor: a job still waiting is removed and the call fails Unavailable. */
  private async removeUnstarted(p: Pending): Promise<void> {
    if (!this.pending.has(p.job.id)) return;
    try {
      if (await this.cmd.hget(p.queue.toKey(p.job.id), 'processedOn')) return;
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
    if (this.cmd.status !== 'ready') {
      if (this.downSince !== undefined && now - this.downSince >= this.tuning.outageFailMs) {
        for (const p of [...this.pending.values()]) {
          this.fail(p, unavailable('lost the connection to the bus (Redis) while the call was in flight; it may or may not have run'));
          this.orphans.add(p);
        }
      }
      return;
    }
    const old = [...this.pending.values()].filter((p) => p.enqueued && now - p.queuedAt >= this.tuning.watchdogIntervalMs);
    if (old.length === 0) return;
    this.probing = true;
    try {
      const keys = old.flatMap((p) => [p.queue.toKey(p.job.id), `${p.queue.toKey(p.job.id)}:lock`]);
      const states = (await this.cmd.eval(PROBE_SCRIPT, keys.length, ...keys)) as string[];
      old.forEach((p, i) => {
        const state = states[i] ?? 'ok';
        p.strikes = state === 'ok' ? 0 : p.strikes + 1;
        // Twice in a row: a reply published just before the probe may still be on its way.
        if (p.strikes >= 2) this.fail(p, unavailable(PROBE_ERRORS[state] ?? LOST_EXECUTOR));
      });
    } catch (err) {
      this.log.debug({ err: (err as Error).message }, 'watchdog probe failed');
    } finally {
      this.probing = false;
    }
  }
}

interface ConsumerDeps {
  url: string;
  shards: number[];
  concurrency: number;
  handler: JobHandler;
  events: RedisEvents;
  log: Logger;
  tuning: Readonly<BullMqTuning>;
  maxTaskResultBytes: number;
  onClosed(consumer: BullMqConsumer): void;
}

/** One executor's workers, one per owned shard, sharing one connection. */
class BullMqConsumer implements Consumer {
  private readonly family: ConnectionFamily;
  private readonly connection: RedisClient;
  private readonly workers: Array<Worker<JobData>>;
  private readonly running = new Map<string, { controller: AbortController; done: Promise<unknown> }>();
  private readonly earlyCancels = new Map<string, number>();
  /** Where a job that may be a task leaves its outcome: the task outlives its gateway. */
  private readonly tasks: TaskStore;
  private closing: Promise<void> | undefined;

  constructor(private readonly deps: ConsumerDeps) {
    this.family = new ConnectionFamily(deps.url, 'toolgate-executor');
    this.connection = coalesceWrites(this.family.root);
    this.tasks = new RedisTaskStore(this.connection);
    watchConnection(this.connection, 'executor', deps.log);
    // The total concurrency is spread over the shards' workers.
    const perWorker = Math.max(1, Math.ceil(deps.concurrency / deps.shards.length));
    const name = `${os.hostname()}:${process.pid}`;
    this.workers = deps.shards.map((shard) => {
      const worker = new Worker<JobData>(queueName(shard), (job) => this.process(job), {
        connection: this.connection,
        name,
        concurrency: perWorker,
        lockDuration: deps.tuning.lockDurationMs,
        stalledInterval: deps.tuning.stalledIntervalMs,
        maxStalledCount: 0,
        maxStartedAttempts: 1,
      });
      worker.on('error', (err) => deps.log.debug({ err: err.message, shard }, 'worker error'));
      worker.on('failed', (job, err) => this.onFailed(job, err));
      return worker;
    });
  }

  cancel(id: string): void {
    const run = this.running.get(id);
    if (run) return run.controller.abort(new ProtocolError(ErrorCode.Cancelled, 'Request cancelled'));
    // The job may be locked here but not yet running: remember the cancellation for a while.
    const now = Date.now();
    for (const [key, until] of this.earlyCancels) {
      if (until > now && this.earlyCancels.size < 10_000) break;
      this.earlyCancels.delete(key);
    }
    this.earlyCancels.set(id, now + EARLY_CANCEL_MS);
  }

  close(graceMs?: number): Promise<void> {
    this.closing ??= (async () => {
      // With Redis down nothing can be recorded anyway; end the connections first, or BullMQ's
      // close would wait for them forever (see ConnectionFamily).
      if (!this.family.up) await this.family.endDisconnected(3000);
      const workersClosed = Promise.all(this.workers.map((w) => w.close()));
      const handlersDone = () => Promise.allSettled([...this.running.values()].map((r) => r.done));
      if (graceMs === undefined) await handlersDone();
      else {
        await withTimeout(handlersDone(), graceMs).catch(() => undefined);
        for (const { controller } of this.running.values()) controller.abort(unavailable('the executor is shutting down'));
        // A handler that ignores its signal must not hold the shutdown forever.
        await withTimeout(handlersDone(), 5000).catch(() => undefined);
      }
      // Recording the last jobs' outcomes needs Redis. If it went down meanwhile, end the
      // connections: their queued commands fail and BullMQ, closing, stops retrying them.
      try {
        await withTimeout(workersClosed, 5000);
      } catch {
        await this.family.endDisconnected(3000);
        await withTimeout(workersClosed, 2000).catch(() => undefined);
      }
      await closeConnection(this.connection);
      this.deps.onClosed(this);
    })();
    return this.closing;
  }

  private async process(bjob: Job<JobData>): Promise<void> {
    const { call, reply } = bjob.data;
    const { events, handler } = this.deps;
    const now = Date.now();
    // The caller has stopped waiting: never start work nobody will receive.
    if (now > call.startBy || now >= call.deadline) return this.reply(reply, call.id, { error: unavailable(NOT_STARTED) }, true);
    if (this.earlyCancels.delete(call.id)) return this.reply(reply, call.id, { error: new ProtocolError(ErrorCode.Cancelled, 'Request cancelled') }, true);
    const controller = jobController();
    const timer = setTimeout(
      () => controller.abort(new ProtocolError(ErrorCode.Timeout, `Timeout: ${call.tool} did not finish before its deadline`)),
      Math.min(MAX_TIMER_MS, call.deadline - now),
    );
    const base = { jobId: call.id, tenant: call.tenant, tool: call.tool, ...(call.trace ? { trace: call.trace } : {}) };
    const started = Date.now();
    events.publish({ type: 'job.started', ...base, at: started });
    // The outcome names the argument shape itself: this process's audit then needs no
    // job.enqueued from the gateway's process, and writes its line as soon as the job ends.
    const args = argumentShape(call.args);
    const progress = call.progress === true ? this.progressPublisher(reply, call.id) : undefined;
    const done = invoke(handler, call, controller.signal, progress && ((message) => progress.push(message))).finally(() => progress?.stop());
    this.running.set(call.id, { controller, done: done.catch(() => undefined) });
    try {
      const result = await done;
      this.reply(reply, call.id, { result });
      events.publish({ type: 'job.completed', ...base, at: Date.now(), durationMs: Date.now() - started, isError: result.isError === true, args });
      if (call.taskId) await this.finishTask(call.taskId, outcomeFor({ result }, this.deps.maxTaskResultBytes));
    } catch (err) {
      const error = err instanceof ProtocolError ? err : new ProtocolError(ErrorCode.InternalError, 'Internal error');
      if (!(err instanceof ProtocolError)) this.deps.log.error({ err, tool: call.tool }, 'a job handler threw a non-protocol error');
      this.reply(reply, call.id, { error });
      events.publish({ type: 'job.failed', ...base, at: Date.now(), durationMs: Date.now() - started, code: error.code, reason: error.message, args });
      if (call.taskId) await this.finishTask(call.taskId, { error: toErrorObject(error) });
      // Recorded as failed in BullMQ too (attempts 1: never retried).
      throw new Error(error.message);
    } finally {
      clearTimeout(timer);
      this.running.delete(call.id);
    }
  }

  /** A job BullMQ failed without running it (it stalled before: the executor died). */
  private onFailed(job: Job<JobData> | undefined, err: Error): void {
    if (!job || err.name !== 'UnrecoverableError') return;
    this.reply(job.data.reply, job.data.call.id, { error: unavailable(LOST_EXECUTOR) }, true);
    // The task ends failed here too: its gateway may be gone, and the call is never run again.
    if (job.data.call.taskId) void this.finishTask(job.data.call.taskId, { error: toErrorObject(unavailable(LOST_EXECUTOR)) });
  }

  private async finishTask(taskId: string, outcome: TaskOutcome): Promise<void> {
    await this.tasks.finish(taskId, outcome).catch((err: Error) => this.deps.log.warn({ err: err.message, taskId }, "could not record a task's outcome"));
  }

  /**
   * Sends a running job's newest line to its caller's gateway: at most one frame per
   * PROGRESS_GAP_MS (the newest wins), none after the job ends, so a chatty command costs Redis
   * a few messages a second however much it prints.
   */
  private progressPublisher(channel: string, id: string): LatestWins<string> {
    return latestWins((message) => void this.connection.publish(channel, encodeProgress(id, message)).catch(() => undefined), PROGRESS_GAP_MS);
  }

  private reply(channel: string, id: string, outcome: Outcome, unreported = false): void {
    this.connection
      .publish(channel, encodeReply(id, outcome, unreported))
      .catch((err: Error) => this.deps.log.warn({ err: err.message, jobId: id }, 'could not publish a reply'));
  }
}

/**
 * A call's checks at epoch-ms times (its deadline, its start-by check, its enqueue timeout) on
 * one Node timer armed for the earliest, instead of a timer each: every call arms them and
 * nearly every call clears them all unfired. Armed once for the first checks (a timer armed and
 * cleared at once can empty Node's list for its duration, which the next call then rebuilds).
 */
class CallTimer {
  private readonly due: Array<{ at: number; fn: () => void }>;
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Infinity;
  private stopped = false;

  constructor(first: Array<{ at: number; fn: () => void }>) {
    this.due = first;
    if (first.length > 0) this.arm(earliest(first));
  }

  /** Runs `fn` at epoch ms `at` (at once if past) unless stopped first. */
  at(at: number, fn: () => void): void {
    if (this.stopped) return;
    this.due.push({ at, fn });
    if (at < this.armedFor) this.arm(at);
  }

  stop(): void {
    this.stopped = true;
    this.due.length = 0;
    clearTimeout(this.timer);
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(() => this.fire(), Math.min(MAX_TIMER_MS, Math.max(0, at - Date.now())));
  }

  private fire(): void {
    this.armedFor = Infinity;
    const now = Date.now();
    // A timer may fire a little early by Date.now(): what is due within a millisecond runs now.
    const ready = this.due.filter((d) => d.at <= now + 1);
    for (const d of ready) this.due.splice(this.due.indexOf(d), 1);
    for (const d of ready) if (!this.stopped) d.fn();
    if (this.stopped || this.due.length === 0) return;
    this.arm(earliest(this.due));
  }
}

function earliest(due: ReadonlyArray<{ at: number }>): number {
  let at = Infinity;
  for (const d of due) if (d.at < at) at = d.at;
  return at;
}

/** A handler that throws instead of rejecting still yields a promise. */
function invoke(handler: JobHandler, job: ToolCallJob, signal: AbortSignal, onProgress?: (message: string) => void): Promise<ToolResult> {
  try {
    return handler(job, signal, onProgress);
  } catch (err) {
    return Promise.reject(err);
  }
}

/**
 * How long before start-by a waiting job's start-by is moved on: early enough that an executor
 * fetching the job just then already reads the new time (one Redis round trip is far less).
 */
function startByMargin(queueTimeoutMs: number): number {
  return Math.min(1000, Math.floor(queueTimeoutMs / 4));
}

function cancelled(signal: AbortSignal): ProtocolError {
  return signal.reason instanceof ProtocolError ? signal.reason : new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
