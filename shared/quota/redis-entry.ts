/**
 * A call's entry on the Redis quota store (`QuotaStore.enter`) as one script: the in-flight
 * lease, the per-minute budget and the admission lease in one round trip, where they were three
 * in a row on every call's path. Each part does exactly what its own operation does, so the two
 * ways agree on every key: the lease parts are `redis.ts`'s TAKE, the budget part is
 * rate-limiter-flexible's RateLimiterRedis (same key, same fixed window: SET NX EX, INCRBY, PTTL).
 */

/**
 * KEYS: the lease set, the budget key, then optionally the extra lease set.
 * ARGV: max, lease ttl ms, lease id, budget per window, window s, then optionally extra max, extra id.
 * Returns {0} when the lease is refused, {-1, ms until the window ends} when the budget is,
 * {1, 1 if the extra lease was taken else 0} when the call may enter.
 */
export const ENTER_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return {0, 0} end
redis.call('SET', KEYS[2], 0, 'EX', ARGV[5], 'NX')
local spent = redis.call('INCRBY', KEYS[2], 1)
local left = redis.call('PTTL', KEYS[2])
if left == -1 then
  redis.call('EXPIRE', KEYS[2], ARGV[5])
  left = 1000 * tonumber(ARGV[5])
end
if spent > tonumber(ARGV[4]) then return {-1, left} end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
if #KEYS < 3 then return {1, 0} end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[6]) then return {1, 0} end
redis.call('ZADD', KEYS[3], now + ttl, ARGV[7])
redis.call('PEXPIRE', KEYS[3], ttl)
return {1, 1}`;

/**
 * Releases leases, one per key: each is announced only if its set was full before (someone may
 * be waiting). KEYS: the sets; ARGV: per key its lease id, its max and the key to announce.
 * Releases of one turn leave together (a call ends holding two leases).
 */
export const RELEASE_SCRIPT = (channel: string) => `
for i = 1, #KEYS do
  local id, max, key = ARGV[i * 3 - 2], ARGV[i * 3 - 1], ARGV[i * 3]
  if redis.call('ZREM', KEYS[i], id) == 1 and redis.call('ZCARD', KEYS[i]) + 1 >= tonumber(max) then
    redis.call('PUBLISH', '${channel}', key)
  end
end
return #KEYS`;
