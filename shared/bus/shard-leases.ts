/**
 * Shard ownership, leased in Redis: each shard is served by exactly one live executor. The key
 * `{prefix}shard:<n>:owner` holds `<executor id> <random token>` with a TTL of the lease; its
 * holder renews it every third of the lease (compare-and-set: only its own value), a candidate
 * tries to take every free one as often (SET NX). An executor that dies stops renewing, so a
 * standby takes its shards over within one lease of its last renewal plus a third; one that
 * shuts down deletes its leases (its own value only) and a standby takes them at its next try.
 *
 * Redis unreachable or restarted empty: nothing is decided on an error (the holder's workers
 * cannot fetch then anyway); a lease found missing is taken again, one found held by another
 * is lost (its worker stops, letting running jobs finish).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../log';
import type { RedisClient } from './redis-connections';

/** Renews when the value is ours; takes it when nobody holds it. 1: held by us, 0: someone else's. */
const RENEW = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

export interface ShardLeasesOptions {
  client: RedisClient;
  /** toolgate's key prefix (redisKeyspace().prefix). */
  prefix: string;
  /** TOOLGATE_EXECUTOR_ID: who holds a lease, for operators reading the key. */
  owner: string;
  /** The shards this executor is a candidate for. */
  shards: readonly number[];
  /** TOOLGATE_SHARD_LEASE_MS. */
  leaseMs: number;
  log: Logger;
  /** The lease of `shard` is now ours: start serving it. */
  onGained(shard: number): void;
  /** Another executor holds `shard` now: stop serving it. */
  onLost(shard: number): void;
}

export function shardLeaseKey(prefix: string, shard: number): string {
  return `${prefix}shard:${shard}:owner`;
}

export class ShardLeases {
  private readonly value: string;
  private readonly held = new Set<number>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly options: ShardLeasesOptions) {
    this.value = `${options.owner} ${randomUUID()}`;
  }

  /** Tries every shard once now, then keeps renewing and trying every third of the lease. */
  async start(): Promise<void> {
    await this.tick();
    const every = Math.max(50, Math.floor(this.options.leaseMs / 3));
    this.timer = setInterval(() => void this.tick(), every);
    // The workers keep an executor alive, not its lease timer.
    this.timer.unref();
  }

  /** The shards this executor holds now. */
  get shards(): number[] {
    return [...this.held].sort((a, b) => a - b);
  }

  /** Stops renewing and taking (the leases held stay until `release` or their expiry). */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /**
   * Deletes the leases still ours, so a standby takes them at its next try. Never throws; gives
   * up after a lease's time (Redis down: they expire by themselves meanwhile).
   */
  async release(): Promise<void> {
    this.stop();
    const { client, prefix, leaseMs, log } = this.options;
    const bound = () => new Promise<void>((r) => setTimeout(r, leaseMs).unref());
    await Promise.race([this.ticking, bound()]);
    const released = Promise.all(
      [...this.held].map((shard) =>
        client.eval(RELEASE, 1, shardLeaseKey(prefix, shard), this.value).catch((err: Error) => {
          log.warn({ shard, err: err.message }, 'could not release a shard lease; a standby takes it when it expires');
        }),
      ),
    );
    await Promise.race([released, bound()]);
    this.held.clear();
  }

  private tick(): Promise<void> {
    // A tick waiting on Redis (down: patient commands wait for the reconnect) is not doubled.
    this.ticking ??= this.renewAll().finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  private async renewAll(): Promise<void> {
    const { client, prefix, shards, leaseMs, log } = this.options;
    await Promise.all(
      shards.map(async (shard) => {
        let ours: boolean;
        try {
          ours = (await client.eval(RENEW, 1, shardLeaseKey(prefix, shard), this.value, String(leaseMs))) === 1;
        } catch (err) {
          log.debug({ shard, err: (err as Error).message }, 'could not renew or take a shard lease');
          return;
        }
        // Taken just as this executor stopped: kept only so that `release` returns it.
        if (this.stopped) {
          if (ours) this.held.add(shard);
          return;
        }
        if (ours && !this.held.has(shard)) {
          this.held.add(shard);
          log.info({ shard }, 'serving shard (lease taken)');
          this.options.onGained(shard);
        } else if (!ours && this.held.has(shard)) {
          this.held.delete(shard);
          log.warn({ shard }, 'another executor holds this shard now (lease lost); stopped taking its calls');
          this.options.onLost(shard);
        }
      }),
    );
  }
}
