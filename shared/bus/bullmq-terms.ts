/**
 * The terms a tool call travels under on BullMQ, shared by the producer (the gateway side) and
 * the consumer (the executor side): what a job holds, how long it is kept, the options that make
 * it run at most once, the tuning of locks and checks, and the failures a caller can be told.
 */
import { ErrorCode, ProtocolError } from '../protocol/errors';
import type { ToolCallJob } from './bus';
import { queueName } from './redis-wire';

export interface BullMqTuning {
  /**
   * A running job's lock (TOOLGATE_JOB_LOCK_MS), renewed every second: its margin over that
   * second is the Redis outage a running call survives (the lock lapsing while Redis is away
   * would have the stall check fail a call that still runs); an executor that dies is detected
   * about this long after.
   */
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

/** How often a running job's lock is renewed (BullMQ's default is half the lock). */
const LOCK_RENEW_MS = 1000;
/** The shortest Redis outage the gateway waits out before answering calls in flight. */
const MIN_OUTAGE_FAIL_MS = 3000;

/**
 * The terms that follow TOOLGATE_JOB_LOCK_MS: the lock, and how long the gateway waits out a Redis
 * outage before telling the callers of calls in flight that their outcome is unknown — as long as
 * the executor's lock outlives it, so a call that survives the outage is also answered.
 */
export function lockTerms(jobLockMs: number): Pick<BullMqTuning, 'lockDurationMs' | 'outageFailMs'> {
  return { lockDurationMs: jobLockMs, outageFailMs: Math.max(MIN_OUTAGE_FAIL_MS, jobLockMs - LOCK_RENEW_MS) };
}

export const DEFAULT_TUNING: Readonly<BullMqTuning> = Object.freeze({
  // TOOLGATE_JOB_LOCK_MS's default (shared/config.ts), and the outage wait that follows from it.
  ...lockTerms(5000),
  stalledIntervalMs: 1000,
  watchdogIntervalMs: 1000,
  enqueueTimeoutMs: 3000,
  connectTimeoutMs: 10_000,
  keepCompleted: { age: 60, count: 1000 },
  keepFailed: { age: 3600, count: 1000 },
  eventBatchMs: 50,
});

/** What a BullMQ job holds. */
export interface JobData {
  call: ToolCallJob;
  /** The gateway's reply channel. */
  reply: string;
}

/** Every job's options: attempts 1 (never re-run), kept by age and count, no stack traces stored. */
export function jobOptions(tuning: Readonly<BullMqTuning>) {
  return { attempts: 1, removeOnComplete: tuning.keepCompleted, removeOnFail: tuning.keepFailed, stackTraceLimit: 0 };
}

/**
 * A worker's options: a job whose executor died (its lock lapsed) is failed by the next stall
 * check, never started again (maxStalledCount 0, maxStartedAttempts 1).
 */
export function workerOptions(tuning: Readonly<BullMqTuning>) {
  return {
    lockDuration: tuning.lockDurationMs,
    lockRenewTime: Math.min(LOCK_RENEW_MS, Math.floor(tuning.lockDurationMs / 2)),
    stalledInterval: tuning.stalledIntervalMs,
    maxStalledCount: 0,
    maxStartedAttempts: 1,
  };
}

/**
 * How long before start-by a waiting job's start-by is moved on: early enough that an executor
 * fetching the job just then already reads the new time (one Redis round trip is far less).
 */
export function startByMargin(queueTimeoutMs: number): number {
  return Math.min(1000, Math.floor(queueTimeoutMs / 4));
}

/** The call did not run (no executor started it): safe to retry. */
export const unavailable = (message: string) => new ProtocolError(ErrorCode.Unavailable, `Unavailable: ${message}`);
/** The call was handed to an executor and its answer was lost: it may have run. */
export const outcomeUnknown = (message: string) => new ProtocolError(ErrorCode.OutcomeUnknown, `Outcome unknown: ${message}`);
export const BUS_DOWN = 'the bus (Redis) is unreachable; the call did not run; try again shortly';
export const NOT_STARTED = 'no executor started the call in time; it did not run';
/** What an executor that finds a job failed by the stall check says: only the gateway knows whether its handler started. */
export const LOST_EXECUTOR = 'the executor that took this call stopped before it finished; it may have run, and it is not retried';
/** The same, when the gateway knows the executor never started the tool (it never heard the job taken). */
export const LOST_EXECUTOR_UNSTARTED = 'the executor that took this call stopped before starting it; it did not run';

/** At start-by, with no executor consuming the call's shard. */
export function noExecutor(shard: number): string {
  return `no executor consumes shard ${shard} (queue ${queueName(shard)}), so none started the call in time; it did not run. Start \`toolgate executor\` on this Redis (TOOLGATE_EXECUTOR_SHARDS "all" or including ${shard})`;
}
