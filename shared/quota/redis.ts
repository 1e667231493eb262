/**
 * The quota store on Redis, shared by every gateway: rate-limiter-flexible's Redis limiter for
 * the per-minute budget (INCR + EXPIRE in one script), and leases as sorted sets
 * (`toolgate:lease:<key>`, member = lease id, score = when it lapses), taken and renewed by Lua
 * on Redis's own clock, so gateways with drifting clocks agree. A holder renews its leases every
 * third of their lifetime; a gateway that dies stops renewing and its leases lapse within
 * `leaseTtlMs`. A release from a full set is announced on `toolgate:lease:released` so waiters
 * elsewhere retry (a set that was not full had nobody waiting).
 *
 * Redis down: every operation rejects with QuotaStoreDown at once (fail-fast connection); a
 * lease released meanwhile lapses by itself.
 */
import { randomUUID } from 'node:crypto';
import { RateLimiterRedis, RateLimiterRes } from './limiters';
import { closeConnection, coalesceWrites, failFastConnection, patientConnection, RedisClient, redisKeyspace, waitReady } from '../bus/redis-connections';
import type { RedisConfig } from '../redis-config';
import { ENTER_SCRIPT, RELEASE_SCRIPT } from './redis-entry';
import type { BudgetVerdict, Entry, EntryVerdict, Lease, QuotaStore } from './store';
import { QuotaStoreDown } from './store';

/** The lease sets' prefix (on a Cluster `{toolgate}:lease:`, one hash slot with the budgets: `redisKeyspace`). */
export const LEASE_PREFIX = 'toolgate:lease:';
export const RELEASED_CHANNEL = 'toolgate:lease:released';

/** Drops lapsed leases, then adds ours if fewer than ARGV[1] remain. KEYS[1] the set; ARGV: max, ttl ms, id. */
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

/** Pushes back the lapse of leases still held. KEYS: sets; ARGV: ttl ms, then one id per key. */
const RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #KEYS do
  if redis.call('ZADD', KEYS[i], 'XX', 'CH', now + tonumber(ARGV[1]), ARGV[i + 1]) == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
end
return #KEYS`;

/** Counts leases not yet lapsed. */
const COUNT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')`;

/** The scripts run by EVALSHA (ioredis sends the body once per connection, on NOSCRIPT). */
interface Scripts {
  toolgateEnter(numKeys: number, ...args: string[]): Promise<[number, number]>;
  toolgateRelease(numKeys: number, ...args: string[]): Promise<number>;
}

export interface RedisQuotaOptions {
  redis: Readonly<RedisConfig>;
  /**
   * A lease not renewed for this long lapses (its holder died). Default 6 s: a gateway that was
   * SIGKILLed holds its tenants' slots no longer than that; renewals (every third of it) are one
   * EVAL per gateway, whatever it holds.
   */
  leaseTtlMs?: number;
  connectTimeoutMs?: number;
}

export async function createRedisQuotaStore(options: RedisQuotaOptions): Promise<RedisQuotaStore> {
  const store = new RedisQuotaStore(options);
  try {
    await store.start(options.connectTimeoutMs ?? 10_000);
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}

export class RedisQuotaStore implements QuotaStore {
  private readonly cmd: RedisClient;
  private readonly sub: RedisClient;
  private readonly ttlMs: number;
  private readonly leasePrefix: string;
  private readonly budgetPrefix: string;
  private readonly budgets = new Map<number, RateLimiterRedis>();
  /** Leases held by this process: lease id → its set's key and the most it holds. */
  private readonly held_ = new Map<string, { set: string; max: number }>();
  private readonly listeners = new Set<(key: string) => void>();
  /** Releases asked for in this turn, sent together at its end. */
  private releasing: Array<{ set: string; id: string; max: number; key: string }> = [];
  private released: { promise: Promise<void>; resolve(): void } | undefined;
  private renewer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: RedisQuotaOptions) {
    this.ttlMs = options.leaseTtlMs ?? 6000;
    const { prefix } = redisKeyspace(options.redis);
    this.leasePrefix = `${prefix}lease:`;
    this.budgetPrefix = `${prefix}budget`;
    this.cmd = coalesceWrites(failFastConnection(options.redis, 'toolgate-quota'));
    this.cmd.defineCommand('toolgateEnter', { lua: ENTER_SCRIPT });
    this.cmd.defineCommand('toolgateRelease', { lua: RELEASE_SCRIPT(RELEASED_CHANNEL) });
    this.sub = patientConnection(options.redis, 'toolgate-quota-sub');
    // Errors surface as rejected operations; the 'error' events would otherwise be unhandled.
    this.cmd.on('error', () => undefined);
    this.sub.on('error', () => undefined);
  }

  async start(connectTimeoutMs: number): Promise<void> {
    await Promise.all([waitReady(this.cmd, this.options.redis, connectTimeoutMs), waitReady(this.sub, this.options.redis, connectTimeoutMs)]);
    this.sub.on('message', (_channel: string, key: string) => {
      for (const listener of this.listeners) listener(key);
    });
    await this.sub.subscribe(RELEASED_CHANNEL);
    this.renewer = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.ttlMs / 3)));
    this.renewer.unref();
  }

  async spend(key: string, perMinute: number): Promise<BudgetVerdict> {
    this.sendReleases();
    let limiter = this.budgets.get(perMinute);
    if (!limiter) {
      limiter = new RateLimiterRedis({
        storeClient: this.cmd,
        points: perMinute,
        duration: 60,
        keyPrefix: `${this.budgetPrefix}:${perMinute}`,
        rejectIfRedisNotReady: true,
      });
      this.budgets.set(perMinute, limiter);
    }
    try {
      await limiter.consume(key, 1);
      return { allowed: true, retryAfterMs: 0 };
    } catch (res) {
      if (res instanceof RateLimiterRes) return { allowed: false, retryAfterMs: Math.max(1, res.msBeforeNext) };
      throw down(res);
    }
  }

  async lease(key: string, max: number): Promise<Lease | undefined> {
    this.sendReleases();
    const set = this.leasePrefix + key;
    const id = randomUUID();
    let taken: unknown;
    try {
      taken = await this.cmd.eval(TAKE, 1, set, String(max), String(this.ttlMs), id);
    } catch (err) {
      throw down(err);
    }
    if (taken !== 1) return undefined;
    return this.hold(id, set, key, max);
  }

  async enter(entry: Entry): Promise<EntryVerdict> {
    this.sendReleases();
    const id = randomUUID();
    const keys = [this.leasePrefix + entry.lease.key, `${this.budgetPrefix}:${entry.budget.perMinute}:${entry.budget.key}`];
    const args = [String(entry.lease.max), String(this.ttlMs), id, String(entry.budget.perMinute), '60'];
    const extraId = entry.extra ? randomUUID() : undefined;
    if (entry.extra) {
      keys.push(this.leasePrefix + entry.extra.key);
      args.push(String(entry.extra.max), extraId!);
    }
    let answer: [number, number];
    try {
      answer = await (this.cmd as unknown as Scripts).toolgateEnter(keys.length, ...keys, ...args);
    } catch (err) {
      throw down(err);
    }
    const [verdict, detail] = answer.map(Number) as [number, number];
    if (verdict === 0) return { allowed: false, refused: 'lease' };
    if (verdict < 0) return { allowed: false, refused: 'budget', retryAfterMs: Math.max(1, detail) };
    const lease = this.hold(id, keys[0]!, entry.lease.key, entry.lease.max);
    if (detail !== 1) return { allowed: true, lease };
    return { allowed: true, lease, extra: this.hold(extraId!, keys[2]!, entry.extra!.key, entry.extra!.max) };
  }

  async held(key: string): Promise<number> {
    this.sendReleases();
    try {
      return Number(await this.cmd.eval(COUNT, 1, this.leasePrefix + key));
    } catch (err) {
      throw down(err);
    }
  }

  onRelease(listener: (key: string) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.renewer);
    await Promise.all([...this.held_].map(([id, { set }]) => this.release(id, set.slice(this.leasePrefix.length))));
    this.listeners.clear();
    await Promise.all([closeConnection(this.sub), closeConnection(this.cmd)]);
  }

  /** A lease Redis granted: renewed while held here. */
  private hold(id: string, set: string, key: string, max: number): Lease {
    this.held_.set(id, { set, max });
    return { release: () => this.release(id, key) };
  }

  /** Releases wait for the end of the turn, to leave together (a call ends holding two leases). */
  private release(id: string, key: string): Promise<void> {
    const held = this.held_.get(id);
    if (!held) return Promise.resolve();
    this.held_.delete(id);
    this.releasing.push({ set: held.set, id, max: held.max, key });
    if (!this.released) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.released = { promise, resolve };
      process.nextTick(() => this.sendReleases());
    }
    return this.released.promise;
  }

  /**
   * Sends the releases asked for so far. Every other command of this store calls it first: on
   * one connection commands run in order, so a count or a take never misses a release asked for
   * before it.
   */
  private sendReleases(): void {
    const pending = this.released;
    if (!pending) return;
    const batch = this.releasing;
    this.releasing = [];
    this.released = undefined;
    const args = batch.flatMap((r) => [r.id, String(r.max), r.key]);
    // Best effort: a lease Redis could not hear of being released lapses by itself.
    (this.cmd as unknown as Scripts).toolgateRelease(batch.length, ...batch.map((r) => r.set), ...args).then(
      () => pending.resolve(),
      () => pending.resolve(),
    );
  }

  private async renew(): Promise<void> {
    this.sendReleases();
    if (this.held_.size === 0 || this.cmd.status !== 'ready') return;
    const ids = [...this.held_.keys()];
    const sets = ids.map((id) => this.held_.get(id)!.set);
    await this.cmd.eval(RENEW, sets.length, ...sets, String(this.ttlMs), ...ids).catch(() => undefined);
  }
}

/** The caller hears that Redis is unreachable; the driver's own wording stays out of replies. */
function down(err: unknown): QuotaStoreDown {
  return new QuotaStoreDown('the quota store (Redis) is unreachable', { cause: err });
}
