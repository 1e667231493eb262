/**
 * Events and token revocations of the Redis bus.
 *
 * Events: one pub/sub channel, every process subscribed from start-up (so a subscriber never
 * misses what is published after `subscribe` returns). A process delivers its own events to
 * its listeners directly — at once, and even while Redis is down — and skips their echo from
 * the channel, recognised by the origin id each message starts with. Events leave in batches:
 * every process receives every message, so each one wakes every process on the bus (one message
 * per event cost the bus about half its throughput, bench/bus-reply.ts). A job's lifecycle
 * events (three or four per tool call) wait up to `jobBatchMs` for company, so at any rate of
 * calls the bus carries about one events message per process per `jobBatchMs` rather than
 * several per call; their remote readers (other processes' metrics and audit) need no haste.
 * Any other event (a revocation, a sandbox starting or stopping) leaves at the end of the turn,
 * taking the waiting job events with it. Events of one process keep their order; events of two
 * processes may cross.
 *
 * Revocations: a Redis hash (identity → not-before, epoch seconds) is the record; each process
 * keeps a copy in memory, loaded at start and on every reconnect and kept current by
 * `token.revoked` events, so `notBefore` is a synchronous Map lookup on the request path.
 */
import type { Logger } from '../log';
import { ErrorCode, ProtocolError } from '../protocol/errors';
import type { Revocations } from './bus';
import type { BusEvent } from './events';
import type { RedisClient } from './redis-connections';

export const EVENTS_CHANNEL = 'toolgate:events';
export const REVOCATIONS_KEY = 'toolgate:revocations';

export class RedisEvents {
  private readonly listeners = new Set<(event: BusEvent) => void>();
  private outbox: BusEvent[] = [];
  /** A flush at the end of this turn (an urgent event is waiting). */
  private soon: NodeJS.Immediate | undefined;
  /** A flush when the oldest waiting job event has waited `jobBatchMs`. */
  private later: NodeJS.Timeout | undefined;

  constructor(
    private readonly connection: RedisClient,
    private readonly origin: string,
    private readonly log: Logger,
    /** How long a job lifecycle event may wait for others before it leaves (0: end of the turn). */
    private readonly jobBatchMs = 0,
  ) {}

  publish(event: BusEvent): void {
    this.deliver(event);
    this.outbox.push(event);
    if (this.soon) return;
    if (this.jobBatchMs > 0 && event.type.startsWith('job.')) this.later ??= setTimeout(() => this.flush(), this.jobBatchMs);
    else this.soon = setImmediate(() => this.flush());
  }

  /** Sends the events waiting (also called before the connection closes). */
  flush(): void {
    clearImmediate(this.soon);
    clearTimeout(this.later);
    this.soon = undefined;
    this.later = undefined;
    if (this.outbox.length === 0) return;
    const batch = this.outbox;
    this.outbox = [];
    // Fire-and-forget: while Redis is down other processes miss the events; ours had them.
    this.connection.publish(EVENTS_CHANNEL, `${this.origin} ${JSON.stringify(batch)}`).catch(() => undefined);
  }

  subscribe(listener: (event: BusEvent) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** A message from the events channel, routed here by the subscriber connection. */
  receive(message: string): void {
    const space = message.indexOf(' ');
    if (space < 0 || message.slice(0, space) === this.origin) return;
    let batch: unknown;
    try {
      batch = JSON.parse(message.slice(space + 1));
    } catch {
      batch = undefined;
    }
    if (!Array.isArray(batch)) return this.log.warn('ignored a malformed message on the events channel');
    for (const event of batch as unknown[]) {
      if (typeof event === 'object' && event !== null && typeof (event as { type?: unknown }).type === 'string') this.deliver(event as BusEvent);
    }
  }

  private deliver(event: BusEvent): void {
    for (const listener of this.listeners) {
      queueMicrotask(() => {
        try {
          listener(event);
        } catch (err) {
          this.log.error({ err, event: event.type }, 'a bus event listener threw');
        }
      });
    }
  }
}

/** Keeps the larger not-before: a revocation is never undone by an older one. */
const REVOKE_SCRIPT = `
local current = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local wanted = tonumber(ARGV[2])
if wanted > current then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return wanted end
return current`;

export class RedisRevocations implements Revocations {
  private readonly local = new Map<string, number>();

  constructor(
    private readonly connection: RedisClient,
    private readonly events: RedisEvents,
  ) {
    events.subscribe((event) => {
      if (event.type === 'token.revoked') this.learn(event.id, event.notBefore);
    });
  }

  /** Merges the stored revocations into the local copy. */
  async load(): Promise<void> {
    const stored = await this.connection.hgetall(REVOCATIONS_KEY);
    for (const [id, value] of Object.entries(stored)) this.learn(id, Number(value));
  }

  async revoke(id: string, notBeforeSeconds: number): Promise<void> {
    if (!Number.isSafeInteger(notBeforeSeconds) || notBeforeSeconds < 0) {
      throw new ProtocolError(ErrorCode.InvalidParams, 'A revocation needs a not-before time in whole epoch seconds');
    }
    let stored: unknown;
    try {
      stored = await this.connection.eval(REVOKE_SCRIPT, 1, REVOCATIONS_KEY, id, String(notBeforeSeconds));
    } catch {
      throw new ProtocolError(ErrorCode.Unavailable, 'Unavailable: the revocation could not be stored because Redis is unreachable; nothing was revoked');
    }
    this.learn(id, Number(stored));
    this.events.publish({ type: 'token.revoked', id, notBefore: Number(stored), at: Date.now() });
  }

  notBefore(id: string): number | undefined {
    return this.local.get(id);
  }

  private learn(id: string, notBefore: number): void {
    if (!Number.isFinite(notBefore)) return;
    if (notBefore > (this.local.get(id) ?? -Infinity)) this.local.set(id, notBefore);
  }
}
