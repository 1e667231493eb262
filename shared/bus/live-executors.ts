/**
 * The executors alive on one Redis, for the fair share of shards (shard-share.ts). One sorted
 * set `{prefix}executors` (member: executor id, score: when its entry expires, in Redis's own
 * clock so hosts' clocks need not agree) and one hash `{prefix}executor-shards` (id → what it
 * is a candidate for and where its workspaces live). Both keys carry the prefix's hash tag on a
 * Cluster: one slot, so one script updates them together.
 *
 * Each executor renews its entry on its lease tick, before its leases: an executor that dies
 * leaves the set no later than its leases expire, so the survivors' shares have grown by the
 * time its shards are free. One that shuts down leaves at once.
 */
import type { RedisClient } from './redis-connections';

/** One live executor, as the others see it. */
export interface LiveExecutor {
  /** TOOLGATE_EXECUTOR_ID. */
  id: string;
  /** The shards it is a candidate for. */
  shards: readonly number[];
  /** Its data directory's id (executor/workspaces.ts): equal ids reach the same workspaces. */
  dataDir: string;
}

/** Renews ARGV[1]'s entry for ARGV[2] ms, drops the expired ones, returns [id, entry, id, entry, …] of the living. */
const BEAT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do redis.call('HDEL', KEYS[2], id) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
end
return out`;
const LEAVE = `redis.call('ZREM', KEYS[1], ARGV[1]) redis.call('HDEL', KEYS[2], ARGV[1]) return 1`;

export function liveExecutorKeys(prefix: string): [set: string, details: string] {
  return [`${prefix}executors`, `${prefix}executor-shards`];
}

export class LiveExecutors {
  private readonly keys: [string, string];
  private readonly entry: string;

  constructor(
    private readonly client: RedisClient,
    prefix: string,
    private readonly self: LiveExecutor,
    private readonly ttlMs: number,
  ) {
    this.keys = liveExecutorKeys(prefix);
    this.entry = JSON.stringify({ shards: self.shards, dataDir: self.dataDir });
  }

  /** Renews this executor's entry; returns every live executor, this one included. */
  async beat(): Promise<LiveExecutor[]> {
    const raw = (await this.client.eval(BEAT, 2, ...this.keys, this.self.id, String(this.ttlMs), this.entry)) as string[];
    const live: LiveExecutor[] = [];
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const parsed = parseEntry(raw[i]!, raw[i + 1]!);
      if (parsed) live.push(parsed);
    }
    if (!live.some((e) => e.id === this.self.id)) live.push(this.self);
    return live;
  }

  /** Leaves the set at once (shutdown): the others' shares grow at their next tick. */
  async leave(): Promise<void> {
    await this.client.eval(LEAVE, 2, ...this.keys, this.self.id);
  }
}

/** An entry another version or a hand wrote wrongly counts as no executor rather than a crash. */
function parseEntry(id: string, entry: string): LiveExecutor | undefined {
  try {
    const { shards, dataDir } = JSON.parse(entry) as { shards?: unknown; dataDir?: unknown };
    if (!Array.isArray(shards) || !shards.every((s) => Number.isInteger(s))) return undefined;
    return { id, shards: shards as number[], dataDir: typeof dataDir === 'string' ? dataDir : '' };
  } catch {
    return undefined;
  }
}
