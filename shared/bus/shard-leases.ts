/**
 * Shard ownership, leased in Redis: each shard is served by exactly one live executor. The key
 * `{prefix}shard:<n>:owner` holds `<executor id> <random token>` with a TTL of the lease; its
 * holder renews it every third of the lease (compare-and-set: only its own value). On the same
 * tick each executor renews its entry among the live executors (live-executors.ts) and takes
 * free shards up to its fair share (shard-share.ts), so the shards spread over the executors
 * alive. An executor that dies stops renewing, so the others take its shards over within one
 * lease of its last renewal plus a third (their shares grow as it leaves the live set); one that
 * shuts down deletes its leases (its own value only) and the others take them at their next try.
 *
 * One holding more than its share (another executor came up) hands the extra shards over the
 * way a shutdown does: `onHandOver` stops its worker for that shard and lets the running jobs
 * finish while the lease is still renewed, then the lease is deleted: never two owners at once,
 * and the shard's queued calls wait for the next owner.
 *
 * Redis unreachable or restarted empty: nothing is decided on an error (the holder's workers
 * cannot fetch then anyway); a lease found missing is taken again, one found held by another
 * is lost (its worker stops, letting running jobs finish).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../log';
import { LiveExecutor, LiveExecutors } from './live-executors';
import type { RedisClient } from './redis-connections';
import { planShare } from './shard-share';

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
  /**
   * The id of this executor's data directory: shards are handed over only to an executor with
   * the same (which reaches the same workspaces). Executors that leave it unset share ''.
   */
  dataDir?: string;
  /** TOOLGATE_SHARD_LEASE_MS. */
  leaseMs: number;
  log: Logger;
  /** The lease of `shard` is now ours: start serving it. */
  onGained(shard: number): void;
  /** Another executor holds `shard` now: stop serving it. */
  onLost(shard: number): void;
  /**
   * `shard` goes to another executor (beyond this one's share): stop taking its jobs and resolve
   * once the running ones finished (its queued calls wait meanwhile).
   */
  onHandOver(shard: number): Promise<void>;
  /** The drain finished in time: the last step before the lease is deleted (stop the moved tenants' sandboxes). */
  onHandedOver?(shard: number): Promise<void>;
  /** The drain took longer than a lease: serve `shard` again (its queued calls must not wait on a long call). */
  onHandOverAborted?(shard: number): void;
  /** Whether calls of `shard` run here now: after an aborted hand-over, the next waits for an idle moment. */
  busy?(shard: number): boolean;
}

export function shardLeaseKey(prefix: string, shard: number): string {
  return `${prefix}shard:${shard}:owner`;
}

export class ShardLeases {
  private readonly value: string;
  private readonly held = new Set<number>();
  /** Held shards whose worker is closing before the lease is given up. */
  private readonly handing = new Map<number, symbol>();
  /** Shards whose hand-over drained too long once: handed over only when none of their calls runs. */
  private readonly waitIdle = new Set<number>();
  private readonly handOvers = new Set<Promise<void>>();
  private readonly self: LiveExecutor;
  private readonly live: LiveExecutors;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private steps: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(private readonly options: ShardLeasesOptions) {
    this.value = `${options.owner} ${randomUUID()}`;
    this.self = { id: options.owner, shards: [...options.shards], dataDir: options.dataDir ?? '' };
    this.live = new LiveExecutors(options.client, options.prefix, this.self, options.leaseMs);
  }

  /** Takes this executor's share of the free shards now, then keeps renewing and balancing every third of the lease. */
  async start(): Promise<void> {
    await this.tick();
    // Stopped during the first tick (a close during start-up): no timer to outlive it.
    if (this.stopped) return;
    const every = Math.max(50, Math.floor(this.options.leaseMs / 3));
    this.timer = setInterval(() => void this.tick(), every);
    // The workers keep an executor alive, not its lease timer.
    this.timer.unref();
  }

  /** The shards this executor holds now (those being handed over included). */
  get shards(): number[] {
    return [...this.held].sort((a, b) => a - b);
  }

  /** Stops renewing and taking (the leases held stay until `release` or their expiry). */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /**
   * Deletes the leases still ours and this executor's live entry, so the others take them at
   * their next try. Never throws; gives up after a lease's time (Redis down: they expire by
   * themselves meanwhile).
   */
  async release(): Promise<void> {
    this.stop();
    const { leaseMs, log } = this.options;
    const bound = () => new Promise<void>((r) => setTimeout(r, leaseMs).unref());
    await Promise.race([Promise.all([this.ticking, ...this.handOvers]), bound()]);
    const released = Promise.all([
      ...[...this.held].map((shard) => this.releaseOne(shard)),
      this.live.leave().catch((err: Error) => log.debug({ err: err.message }, 'could not leave the live executors; the entry expires by itself')),
    ]);
    await Promise.race([released, bound()]);
    this.held.clear();
  }

  private releaseOne(shard: number): Promise<unknown> {
    const { client, prefix, log } = this.options;
    return client.eval(RELEASE, 1, shardLeaseKey(prefix, shard), this.value).catch((err: Error) => {
      log.warn({ shard, err: err.message }, 'could not release a shard lease; another executor takes it when it expires');
    });
  }

  private tick(): Promise<void> {
    // A tick waiting on Redis (down: patient commands wait for the reconnect) is not doubled.
    this.ticking ??= this.exclusive(() => this.balance()).finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  /**
   * Runs `step` after every step before it: a hand-over's release must not cross a tick's
   * renewal in flight, whose answer would take the shard back as it is given up.
   */
  private exclusive(step: () => Promise<void>): Promise<void> {
    const run = this.steps.then(step);
    this.steps = run.catch(() => undefined);
    return run;
  }

  /** One look at Redis: renew, then take or hand over toward the fair share. */
  private async balance(): Promise<void> {
    const { client, prefix, log } = this.options;
    // Stopped: the live entry is left (release), not renewed again.
    if (this.stopped) return;
    // The live entry first: it expires before the leases renewed after it.
    const live = await this.live.beat().catch((err: Error) => {
      log.debug({ err: err.message }, 'could not renew this executor among the live ones');
      return undefined;
    });
    await Promise.all([...this.held].map((shard) => this.renew(shard)));
    if (this.stopped || !live) return;
    const universe = [...new Set(live.flatMap((e) => e.shards))];
    let owners: Array<string | null>;
    try {
      owners = universe.length === 0 ? [] : await client.mget(universe.map((s) => shardLeaseKey(prefix, s)));
    } catch (err) {
      log.debug({ err: (err as Error).message }, 'could not read the shard leases');
      return;
    }
    const holders = new Map<number, string>();
    universe.forEach((shard, i) => {
      const owner = owners[i]?.split(' ')[0];
      if (owner) holders.set(shard, owner);
    });
    const plan = planShare({ self: this.self, live, holders, held: this.held, handing: new Set(this.handing.keys()) });
    for (const shard of plan.handOver) if (!(this.waitIdle.has(shard) && this.options.busy?.(shard))) this.handOver(shard, plan.share);
    let room = plan.room;
    for (const shard of plan.wanted) {
      if (room <= 0 || this.stopped) break;
      if (await this.renew(shard)) room--;
    }
    for (const shard of plan.orphans) if (!this.stopped) await this.renew(shard);
  }

  /** Renews or takes one lease; true when it is ours now. */
  private async renew(shard: number): Promise<boolean> {
    const { client, prefix, leaseMs, log } = this.options;
    let ours: boolean;
    try {
      ours = (await client.eval(RENEW, 1, shardLeaseKey(prefix, shard), this.value, String(leaseMs))) === 1;
    } catch (err) {
      log.debug({ shard, err: (err as Error).message }, 'could not renew or take a shard lease');
      return this.held.has(shard);
    }
    // Taken just as this executor stopped: kept only so that `release` returns it.
    if (this.stopped) {
      if (ours) this.held.add(shard);
      return ours;
    }
    if (ours && !this.held.has(shard)) {
      this.held.add(shard);
      log.info({ shard }, 'serving shard (lease taken)');
      this.options.onGained(shard);
    } else if (!ours && this.held.has(shard)) {
      this.held.delete(shard);
      this.handing.delete(shard);
      log.warn({ shard }, 'another executor holds this shard now (lease lost); stopped taking its calls');
      this.options.onLost(shard);
    }
    return ours;
  }

  /**
   * Closes the shard's worker while the lease is renewed, then deletes the lease. A drain longer
   * than a lease (a long call running) is given up: the shard is served here again, and handed
   * over later at a moment none of its calls runs.
   */
  private handOver(shard: number, share: number): void {
    const { log, leaseMs } = this.options;
    const token = Symbol(`hand-over ${shard}`);
    this.handing.set(shard, token);
    log.info({ shard, share }, "handing shard over to another executor (beyond this one's fair share); its running calls finish here");
    const drained = this.options
      .onHandOver(shard)
      .then(() => true)
      .catch((err: Error) => {
        log.warn({ shard, err: err.message }, 'a shard worker did not close cleanly');
        return true;
      });
    const late = new Promise<false>((r) => setTimeout(() => r(false), leaseMs).unref());
    const done = Promise.race([drained, late]).then((inTime) =>
      this.exclusive(async () => {
        // Lost meanwhile, returned by a shutdown's release, or another hand-over since: nothing to do.
        if (this.handing.get(shard) !== token || !this.held.has(shard) || this.stopped) return;
        this.handing.delete(shard);
        if (!inTime) {
          this.waitIdle.add(shard);
          log.info({ shard }, 'hand-over given up (a call of the shard runs long); serving it again until it is idle');
          this.options.onHandOverAborted?.(shard);
          return;
        }
        this.waitIdle.delete(shard);
        await this.options.onHandedOver?.(shard).catch((err: Error) => log.warn({ shard, err: err.message }, 'the last step of a hand-over failed'));
        this.held.delete(shard);
        await this.releaseOne(shard);
        log.info({ shard }, 'shard handed over (lease released)');
      }),
    );
    this.handOvers.add(done);
    void done.finally(() => this.handOvers.delete(done));
  }
}
