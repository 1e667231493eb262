/**
 * The executor side of the BullMQ bus: one worker per owned shard, sharing one connection. A job
 * past its start-by or deadline is refused unstarted; a running job is aborted through its own
 * controller when its caller cancels (CANCEL_CHANNEL, heard by the bus) or at shutdown. The
 * outcome goes back on the caller's reply channel, to the events and, for a task, to the task
 * store (the task outlives its gateway). A job BullMQ fails because its executor died is
 * answered here too, and never run again (bullmq-terms.ts).
 *
 * Before a tool starts, its caller's gateway hears that the job was taken (a taken frame, whose
 * delivery this side awaits): what lets the gateway tell a call that never ran from one that may
 * have, when Redis or an executor is lost (see bullmq-producer.ts).
 *
 * With a shard lease (`leaseMs` > 0, shard-leases.ts) a shard's worker runs only while this
 * executor holds its lease: started when it is taken, closed (running jobs finish) when it is
 * lost or handed over to another executor (beyond this one's fair share; the lease is returned
 * once the worker closed). The executor's concurrency is spread over the workers it runs now. A new owner's worker runs BullMQ's stall check, which fails the dead owner's running jobs
 * (answered below, never re-run). At shutdown the leases are returned once the workers closed:
 * queued calls stay queued for the next owner.
 */
import * as os from 'node:os';
import { latestWins, LatestWins } from '../latest-wins';
import type { Logger } from '../log';
import { ErrorCode, ProtocolError, toErrorObject } from '../protocol/errors';
import { RedisTaskStore } from '../tasks/redis-store';
import { outcomeFor, TaskOutcome, TaskStore } from '../tasks/task-store';
import type { ToolResult } from '../tools/tool';
import type { Consumer, JobControl, JobHandler, ToolCallJob } from './bus';
import { type Job, Worker } from './bullmq-classes';
import { BullMqTuning, JobData, LOST_EXECUTOR, NOT_STARTED, outcomeUnknown, unavailable, workerOptions } from './bullmq-terms';
import { argumentShape } from './events';
import type { RedisConfig } from '../redis-config';
import {
  closeConnection,
  coalesceWrites,
  ConnectionFamily,
  RedisClient,
  RedisKeyspace,
  redisKeyspace,
  watchConnection,
  withTimeout,
} from './redis-connections';
import type { RedisEvents } from './redis-events';
import { encodeProgress, encodeReply, encodeTaken, Outcome, queueName } from './redis-wire';
import { ShardLeases } from './shard-leases';

/** Cancellations that arrive before their job starts are remembered this long. */
const EARLY_CANCEL_MS = 60_000;
/** Started jobs are remembered this long (a failover's redelivery comes within it), at most this many. */
const STARTED_KEPT_MS = 120_000;
const STARTED_KEPT = 100_000;
const REDELIVERED = 'Redis handed out this call again after a failover; it already started on this executor and is not run twice';
/** Shortest gap between two progress frames of one job. */
const PROGRESS_GAP_MS = 250;

export interface ConsumerDeps {
  redis: Readonly<RedisConfig>;
  /** The shards this executor serves, or, with a lease, is a candidate for. */
  shards: number[];
  /** TOOLGATE_SHARD_LEASE_MS: 0 serves every shard in `shards` at once, with no lease. */
  leaseMs: number;
  /** TOOLGATE_EXECUTOR_ID, named in the leases it holds. */
  owner: string;
  /** The id of the executor's data directory: shards are handed over only where it is the same. */
  dataDirId?: string;
  /** A shard handed over: its worker closed, its lease not yet returned (ConsumeOptions.onHandOver). */
  onHandOver?(shard: number): Promise<void>;
  concurrency: number;
  handler: JobHandler;
  events: RedisEvents;
  log: Logger;
  tuning: Readonly<BullMqTuning>;
  maxTaskResultBytes: number;
  onClosed(consumer: BullMqConsumer): void;
}

/** One executor's workers, one per owned shard, sharing one connection. */
export class BullMqConsumer implements Consumer {
  private readonly family: ConnectionFamily;
  private readonly connection: RedisClient;
  private readonly workers = new Map<number, Worker<JobData>>();
  /** Workers closing after their lease was lost, awaited at shutdown. */
  private readonly retiring = new Set<Promise<void>>();
  private readonly leases: ShardLeases | undefined;
  private readonly keyspace: RedisKeyspace;
  /** The jobs running now, by call id (the shard: a busy shard's hand-over waits, shard-leases.ts). */
  private readonly running = new Map<string, { controller: AbortController; done: Promise<unknown>; shard: number }>();
  private readonly earlyCancels = new Map<string, number>();
  /**
   * Jobs started here lately (id → when forgotten). Redis replicates asynchronously: after a
   * failover the promoted replica may not have seen a job leave its queue, and hands it out again.
   */
  private readonly startedHere = new Map<string, number>();
  /** Where a job that may be a task leaves its outcome: the task outlives its gateway. */
  private readonly tasks: TaskStore;
  private closing: Promise<void> | undefined;

  constructor(private readonly deps: ConsumerDeps) {
    this.family = new ConnectionFamily(deps.redis, 'toolgate-executor');
    this.connection = coalesceWrites(this.family.root);
    this.keyspace = redisKeyspace(deps.redis);
    this.tasks = new RedisTaskStore(this.connection, Date.now, this.keyspace.prefix);
    watchConnection(this.connection, 'executor', deps.log);
    if (deps.leaseMs > 0) {
      this.leases = new ShardLeases({
        client: this.connection,
        prefix: this.keyspace.prefix,
        owner: deps.owner,
        shards: deps.shards,
        dataDir: deps.dataDirId,
        leaseMs: deps.leaseMs,
        log: deps.log,
        onGained: (shard) => this.startWorker(shard),
        onLost: (shard) => void this.retire(shard),
        busy: (shard) => [...this.running.values()].some((r) => r.shard === shard),
        onHandOver: (shard) => this.retire(shard),
        onHandedOver: async (shard) => {
          await deps.onHandOver?.(shard).catch((err: Error) => deps.log.warn({ shard, err: err.message }, "could not stop a handed-over shard's sandboxes"));
        },
        // The closing worker finishes its long call in the background; a new one serves the queue.
        onHandOverAborted: (shard) => this.startWorker(shard),
      });
    } else for (const shard of deps.shards) this.startWorker(shard);
  }

  /** Takes the leases free now (the rest as they expire); resolves after the first try. */
  async start(): Promise<void> {
    await this.leases?.start();
  }

  /** The shards served now. */
  get servedShards(): number[] {
    return [...this.workers.keys()].sort((a, b) => a - b);
  }

  private startWorker(shard: number): void {
    if (this.closing || this.workers.has(shard)) return;
    const worker = new Worker<JobData>(queueName(shard), (job) => this.process(shard, job), {
      connection: this.connection,
      prefix: this.keyspace.bullPrefix,
      name: `${os.hostname()}:${process.pid}`,
      concurrency: this.perWorker(this.workers.size + 1),
      ...workerOptions(this.deps.tuning),
    });
    worker.on('error', (err) => this.deps.log.debug({ err: err.message, shard }, 'worker error'));
    worker.on('failed', (job, err) => this.onFailed(job, err));
    this.workers.set(shard, worker);
    this.spreadConcurrency();
  }

  /** The shard's lease is another's, or goes to another: take no more of its jobs; resolves when the running ones finished. */
  private retire(shard: number): Promise<void> {
    const worker = this.workers.get(shard);
    if (!worker) return Promise.resolve();
    this.workers.delete(shard);
    this.spreadConcurrency();
    const closed = worker.close().catch(() => undefined);
    this.retiring.add(closed);
    void closed.finally(() => this.retiring.delete(closed));
    return closed;
  }

  /**
   * The executor's concurrency over the workers it runs now: one serving 2 of 4 shards runs each
   * at half of it, not a quarter. (A closing worker's running jobs may briefly exceed it.)
   */
  private perWorker(workers: number): number {
    return Math.max(1, Math.ceil(this.deps.concurrency / Math.max(1, workers)));
  }

  private spreadConcurrency(): void {
    const each = this.perWorker(this.workers.size);
    for (const worker of this.workers.values()) if (worker.concurrency !== each) worker.concurrency = each;
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
      // No shard is taken from now on; those held are returned once their workers closed.
      this.leases?.stop();
      const workersClosed = Promise.all([...[...this.workers.values()].map((w) => w.close()), ...this.retiring]);
      const handlersDone = () => Promise.allSettled([...this.running.values()].map((r) => r.done));
      if (graceMs === undefined) await handlersDone();
      else {
        await withTimeout(handlersDone(), graceMs).catch(() => undefined);
        for (const { controller } of this.running.values())
          controller.abort(outcomeUnknown('the executor is shutting down; the call was stopped while it ran, and may have run in part'));
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
      await this.leases?.release();
      await closeConnection(this.connection);
      this.deps.onClosed(this);
    })();
    return this.closing;
  }

  private async process(shard: number, bjob: Job<JobData>): Promise<void> {
    const { call, reply } = bjob.data;
    const { events, handler } = this.deps;
    const now = Date.now();
    // The caller has stopped waiting: never start work nobody will receive.
    if (now > call.startBy || now >= call.deadline) return this.reply(reply, call.id, { error: unavailable(NOT_STARTED) }, true);
    if (!(await this.announceTaken(reply, call, now))) return;
    if (this.earlyCancels.delete(call.id)) return this.reply(reply, call.id, { error: new ProtocolError(ErrorCode.Cancelled, 'Request cancelled') }, true);
    if (this.startedHere.has(call.id)) return this.reply(reply, call.id, { error: unavailable(REDELIVERED) }, true);
    for (const [id, until] of this.startedHere) {
      if (until > now && this.startedHere.size < STARTED_KEPT) break;
      this.startedHere.delete(id);
    }
    this.startedHere.set(call.id, Math.min(call.deadline, now + STARTED_KEPT_MS));
    // No timer here: the handler owns the running job's deadline (see CallBus in bus.ts).
    const controller = new AbortController();
    const base = { jobId: call.id, tenant: call.tenant, tool: call.tool, ...(call.trace ? { trace: call.trace } : {}) };
    const started = Date.now();
    events.publish({ type: 'job.started', ...base, at: started });
    // The outcome names the argument shape itself: this process's audit then needs no
    // job.enqueued from the gateway's process, and writes its line as soon as the job ends.
    const args = argumentShape(call.args);
    const progress = call.progress === true ? this.progressPublisher(reply, call.id) : undefined;
    const done = invoke(handler, call, controller, progress && ((message) => progress.push(message))).finally(() => progress?.stop());
    this.running.set(call.id, { controller, done: done.catch(() => undefined), shard });
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
      this.running.delete(call.id);
    }
  }

  /**
   * Tells the caller's gateway the job is taken, before its tool starts; false when the tool must
   * not start. Not delivered within half the gateway's watchdog interval of taking the job (Redis
   * is down or was restarted): the gateway may already have told its caller the call did not run
   * (it decides on two probes that interval apart), so it does not. No gateway listening: a plain
   * call's caller is gone, so it is refused; a task's job runs anyway (its task outlives its gateway).
   */
  private async announceTaken(reply: string, call: ToolCallJob, takenAt: number): Promise<boolean> {
    const boundMs = Math.max(1, Math.floor(this.deps.tuning.watchdogIntervalMs / 2));
    // No timer: a publish held back while Redis is down resolves late and fails the check below.
    const heardBy = await this.connection.publish(reply, encodeTaken(call.id)).catch(() => -1);
    if (heardBy >= 0 && Date.now() - takenAt <= boundMs) {
      // On a Cluster, PUBLISH counts only the receivers on the node that took it (the message itself
      // reaches every node): zero there says nothing about the gateway, so only a URL or Sentinel
      // setup refuses a plain call nobody listens for.
      if (heardBy > 0 || call.taskId !== undefined || this.deps.redis.topology === 'cluster') return true;
      this.reply(reply, call.id, { error: unavailable("the caller's gateway no longer listens; the call did not run") }, true);
      return false;
    }
    this.deps.log.warn({ jobId: call.id }, "could not tell a call's gateway in time that it was taken; the call does not start");
    this.reply(reply, call.id, { error: unavailable('the executor could not confirm taking the call in time (is Redis down?); it did not run') }, true);
    return false;
  }

  /** A job BullMQ failed without running it (it stalled before: the executor died). */
  private onFailed(job: Job<JobData> | undefined, err: Error): void {
    if (!job || err.name !== 'UnrecoverableError') return;
    // Whether the dead executor had started the tool only the caller's gateway knows: it may turn
    // this into Unavailable (bullmq-producer.ts).
    this.reply(job.data.reply, job.data.call.id, { error: outcomeUnknown(LOST_EXECUTOR) }, true);
    // The task ends failed here too: its gateway may be gone, and the call is never run again.
    if (job.data.call.taskId) void this.finishTask(job.data.call.taskId, { error: toErrorObject(outcomeUnknown(LOST_EXECUTOR)) });
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
      .publish(
        channel,
        encodeReply(id, outcome, unreported, (err) => this.deps.log.error({ err, id }, 'a reply could not be encoded')),
      )
      .catch((err: Error) => this.deps.log.warn({ err: err.message, jobId: id }, 'could not publish a reply'));
  }
}

/** A handler that throws instead of rejecting still yields a promise. */
function invoke(handler: JobHandler, job: ToolCallJob, control: JobControl, onProgress?: (message: string) => void): Promise<ToolResult> {
  try {
    return handler(job, control, onProgress);
  } catch (err) {
    return Promise.reject(err);
  }
}
