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
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { closeConnection, failFastConnection, patientConnection, RedisClient, waitReady } from '../bus/redis-connections';
import type { BudgetVerdict, Lease, QuotaStore } from './store';
import { QuotaStoreDown } from './store';

export const LEASE_PREFIX = 'toolgate:lease:';
export const RELEASED_CHANNEL = 'toolgate:lease:released';
const BUDGET_PREFIX = 'toolgate:budget';

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

/**
 * Releases a lease; announces it only if the set was full before (someone may be waiting), so an
 * uncontended call costs no pub/sub fan-out to every gateway. KEYS[1] the set; ARGV: id, max, key.
 */
const RELEASE = `
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 and redis.call('ZCARD', KEYS[1]) + 1 >= tonumber(ARGV[2]) then
  redis.call('PUBLISH', '${RELEASED_CHANNEL}', ARGV[3])
end
return 1`;

/** Counts leases not yet lapsed. */
const COUNT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')`;

export interface RedisQuotaOptions {
  url: string;
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
  private readonly budgets = new Map<number, RateLimiterRedis>();
  /** Leases held by this process: lease id → its set's key and the most it holds. */
  private readonly held_ = new Map<string, { set: string; max: number }>();
  private readonly listeners = new Set<(key: string) => void>();
  private renewer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: RedisQuotaOptions) {
    this.ttlMs = options.leaseTtlMs ?? 6000;
    this.cmd = failFastConnection(options.url, 'toolgate-quota');
    this.sub = patientConnection(options.url, 'toolgate-quota-sub');
    // Errors surface as rejected operations; the 'error' events would otherwise be unhandled.
    this.cmd.on('error', () => undefined);
    this.sub.on('error', () => undefined);
  }

  async start(connectTimeoutMs: number): Promise<void> {
    await Promise.all([waitReady(this.cmd, this.options.url, connectTimeoutMs), waitReady(this.sub, this.options.url, connectTimeoutMs)]);
    this.sub.on('message', (_channel: string, key: string) => {
      for (const listener of this.listeners) listener(key);
    });
    await this.sub.subscribe(RELEASED_CHANNEL);
    this.renewer = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.ttlMs / 3)));
    this.renewer.unref();
  }

  async spend(key: string, perMinute: number): Promise<BudgetVerdict> {
    let limiter = this.budgets.get(perMinute);
    if (!limiter) {
      limiter = new RateLimiterRedis({
        storeClient: this.cmd,
        points: perMinute,
        duration: 60,
        keyPrefix: `${BUDGET_PREFIX}:${perMinute}`,
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
    const set = LEASE_PREFIX + key;
    const id = randomUUID();
    let taken: unknown;
    try {
      taken = await this.cmd.eval(TAKE, 1, set, String(max), String(this.ttlMs), id);
    } catch (err) {
      throw down(err);
    }
    if (taken !== 1) return undefined;
    this.held_.set(id, { set, max });
    return { release: () => this.release(id, key) };
  }

  async held(key: string): Promise<number> {
    try {
      return Number(await this.cmd.eval(COUNT, 1, LEASE_PREFIX + key));
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
    await Promise.all([...this.held_].map(([id, { set }]) => this.release(id, set.slice(LEASE_PREFIX.length))));
    this.listeners.clear();
    await Promise.all([closeConnection(this.sub), closeConnection(this.cmd)]);
  }

  private async release(id: string, key: string): Promise<void> {
    const held = this.held_.get(id);
    if (!held) return;
    this.held_.delete(id);
    // Best effort: a lease Redis could not hear of being released lapses by itself.
    await this.cmd.eval(RELEASE, 1, held.set, id, String(held.max), key).catch(() => undefined);
  }

  private async renew(): Promise<void> {
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
