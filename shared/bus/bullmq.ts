/**
 * The bus on Redis: BullMQ queues carry tool calls from gateways to executors; replies, events
 * and cancellations travel over Redis pub/sub. This file holds the connections and routes
 * messages; the gateway side is bullmq-producer.ts (with its watchdog, bullmq-watchdog.ts), the
 * executor side bullmq-consumer.ts, the terms both keep bullmq-terms.ts. Only these files use
 * bullmq (through bullmq-classes.ts, which loads only the classes it needs).
 *
 * Shards and tenant affinity: there are TOOLGATE_SHARDS queues `toolgate-calls-<n>`; a tenant's
 * calls always go to shard fnv1a(tenant) % shards, and an executor is a candidate for the shards
 * in TOOLGATE_EXECUTOR_SHARDS. Each shard is served by exactly one live candidate, the holder of
 * its lease in Redis (shard-leases.ts, TOOLGATE_SHARD_LEASE_MS), so every tenant's calls reach
 * the one executor holding its sandbox (affinity); when it dies a standby candidate takes the
 * shard over within a lease and starts fresh sandboxes (the workspace check is the executor's,
 * executor/workspace-homes.ts). With TOOLGATE_SHARD_LEASE_MS=0 every candidate consumes its
 * shards at once: they share the load, and a tenant may get a sandbox on each.
 *
 * Replies: the job carries its gateway's reply channel; the executor publishes the outcome there
 * (measured in bench/bus-reply.ts against BullMQ's waitUntilFinished, which is slower because it
 * reads every job's events from a stream).
 *
 * Never twice: attempts 1, maxStalledCount 0 and maxStartedAttempts 1 — a job whose executor
 * died is failed by the next stall check, never re-run. Whether a lost call may have run is told
 * apart (Unavailable: it did not; OutcomeUnknown: it may have) by the taken frame an executor
 * sends before it starts a tool (bullmq-producer.ts). The caller learns it within seconds:
 * the executor that fails the job publishes a reply, and the gateway's own watchdog probes the
 * state of every call older than a second (so it also works when no executor is left).
 *
 * Busy, not missing; Redis down: see bullmq-producer.ts. Everything reconnects by itself.
 *
 * Expiry: finished jobs are kept by age and count (`keepCompleted`, `keepFailed`); BullMQ's
 * event stream is capped at 10,000 entries; nothing else is stored per call.
 */
import { randomUUID } from 'node:crypto';
import type { Config } from '../config';
import type { RedisConfig } from '../redis-config';
import type { Logger } from '../log';
import { RedisTaskStore } from '../tasks/redis-store';
import type { TaskStore } from '../tasks/task-store';
import type { ToolResult } from '../tools/tool';
import type { Bus, CallOptions, ConsumeOptions, Consumer, JobHandler, ToolCallJob } from './bus';
import { Queue } from './bullmq-classes';
import { BullMqConsumer } from './bullmq-consumer';
import { BullMqProducer } from './bullmq-producer';
import { BullMqTuning, DEFAULT_TUNING, JobData, jobOptions, lockTerms, unavailable } from './bullmq-terms';
import type { BusEvent } from './events';
import {
  closeConnection,
  coalesceWrites,
  failFastConnection,
  patientConnection,
  RedisClient,
  redisKeyspace,
  waitReady,
  watchConnection,
  withTimeout,
} from './redis-connections';
import { EVENTS_CHANNEL, RedisEvents, RedisRevocations } from './redis-events';
import { CANCEL_CHANNEL, queueName, REPLY_CHANNEL_PREFIX, shardOf } from './redis-wire';

export { queueName, shardOf } from './redis-wire';
export { DEFAULT_TUNING, type BullMqTuning } from './bullmq-terms';

export async function createBullMqBus(config: Readonly<Config>, log: Logger, tuning: Partial<BullMqTuning> = {}): Promise<BullMqBus> {
  if (!config.redis) throw new Error('the BullMQ bus needs Redis (TOOLGATE_REDIS_URL, _SENTINELS or _CLUSTER_NODES)');
  const bus = new BullMqBus(config.redis, config, log.child({ module: 'bus' }), { ...DEFAULT_TUNING, ...lockTerms(config.bus.jobLockMs), ...tuning });
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
  private producer: BullMqProducer | undefined;
  private readonly consumers = new Set<BullMqConsumer>();
  private closed = false;
  /** The last lookup of shards no executor consumes (see `unready`). */
  private executorLookup: { at: number; missing: Promise<number[]> } | undefined;

  constructor(
    private readonly redis: Readonly<RedisConfig>,
    private readonly config: Readonly<Config>,
    private readonly log: Logger,
    private readonly tuning: Readonly<BullMqTuning>,
  ) {
    this.cmd = coalesceWrites(failFastConnection(redis, 'toolgate-bus'));
    this.sub = patientConnection(redis, 'toolgate-bus-sub');
    watchConnection(this.cmd, 'bus', log);
    watchConnection(this.sub, 'bus-subscriber', log);
    this.events = new RedisEvents(this.cmd, this.origin, log, tuning.eventBatchMs);
    this.revocations = new RedisRevocations(this.cmd, this.events);
    this.tasks = new RedisTaskStore(this.cmd, Date.now, redisKeyspace(redis).prefix);
  }

  async start(): Promise<void> {
    await Promise.all([waitReady(this.cmd, this.redis, this.tuning.connectTimeoutMs), waitReady(this.sub, this.redis, this.tuning.connectTimeoutMs)]);
    this.sub.on('message', (channel: string, message: string) => this.route(channel, message));
    await this.sub.subscribe(EVENTS_CHANNEL, this.replyChannel);
    for (let shard = 0; shard < this.config.bus.shards; shard++) {
      const queue = new Queue<JobData>(queueName(shard), {
        connection: this.cmd,
        prefix: redisKeyspace(this.redis).bullPrefix,
        defaultJobOptions: jobOptions(this.tuning),
      });
      queue.on('error', (err) => this.log.debug({ err: err.message, queue: queue.name }, 'queue error'));
      this.queues.push(queue);
    }
    await Promise.all(this.queues.map((q) => q.waitUntilReady()));
    await this.revocations.load();
    const producer = new BullMqProducer({
      cmd: this.cmd,
      events: this.events,
      queues: this.queues,
      replyChannel: this.replyChannel,
      queueTimeoutMs: this.config.bus.queueTimeoutMs,
      tuning: this.tuning,
      log: this.log,
    });
    this.producer = producer;
    this.cmd.on('close', () => producer.onDown());
    this.sub.on('close', () => producer.onSubscriberDown());
    this.cmd.on('ready', () => {
      producer.onUp();
      this.revocations.load().catch((err: Error) => this.log.warn({ err: err.message }, 'could not reload revocations'));
    });
  }

  call(job: ToolCallJob, signal: AbortSignal, options?: CallOptions): Promise<ToolResult> {
    if (!this.producer || this.closed) {
      options?.timer?.stop();
      return Promise.reject(unavailable('the bus is closed'));
    }
    return this.producer.call(job, signal, options);
  }

  abort(jobId: string, tenant: string): Promise<void> {
    if (!this.producer) return Promise.reject(unavailable('the bus is closed'));
    return this.producer.abort(jobId, tenant);
  }

  async consume(handler: JobHandler, options: ConsumeOptions): Promise<Consumer> {
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
      redis: this.redis,
      shards: owned,
      leaseMs: this.config.executor.shardLeaseMs,
      owner: this.config.executor.id,
      dataDirId: options.dataDirId,
      onHandOver: options.onHandOver && ((shard) => options.onHandOver!((tenant) => shardOf(tenant, shards) === shard)),
      concurrency: Math.max(1, options.concurrency),
      handler,
      events: this.events,
      log: this.log,
      tuning: this.tuning,
      maxTaskResultBytes: this.config.tasks.maxResultBytes,
      onClosed: (c) => this.consumers.delete(c),
    });
    this.consumers.add(consumer);
    await consumer.start();
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

  async unready(): Promise<string | undefined> {
    if (!(await this.ready())) return this.closed ? 'the bus is closed' : 'the bus (Redis) is unreachable';
    const missing = await this.shardsWithoutExecutor();
    if (missing.length === 0) return undefined;
    const which = missing.length === 1 ? `shard ${missing[0]}` : `shards ${missing.join(', ')}`;
    return `no executor consumes ${which} of ${this.queues.length}: its calls cannot run; start \`toolgate executor\` on this Redis (TOOLGATE_EXECUTOR_SHARDS "all", or naming ${which})`;
  }

  /** Shards with no worker connected (BullMQ's worker registry, CLIENT LIST), at most once a second. */
  private shardsWithoutExecutor(): Promise<number[]> {
    const now = Date.now();
    if (this.executorLookup && now - this.executorLookup.at < 1000) return this.executorLookup.missing;
    const missing = withTimeout(Promise.all(this.queues.map((q) => q.getWorkersCount())), 1000).then(
      (counts) => counts.flatMap((n, shard) => (n > 0 ? [] : [shard])),
      // Refused (an ACL without CLIENT LIST) or slow: unknown, and unknown is not "none".
      () => [],
    );
    this.executorLookup = { at: now, missing };
    return missing;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.producer?.close();
    await Promise.all([...this.consumers].map((c) => c.close(0)));
    await withTimeout(Promise.all(this.queues.map((q) => q.close())), 2000).catch(() => undefined);
    this.events.flush();
    await Promise.all([closeConnection(this.sub), closeConnection(this.cmd)]);
  }

  private route(channel: string, message: string): void {
    if (channel === this.replyChannel) this.producer?.onReply(message);
    else if (channel === EVENTS_CHANNEL) this.events.receive(message);
    else if (channel === CANCEL_CHANNEL) for (const c of this.consumers) c.cancel(message);
  }
}
