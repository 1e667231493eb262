/**
 * The Redis connections of the BullMQ bus, in two kinds:
 * - `failFast`: commands on the caller's path (enqueue, withdraw, publish, revoke). With no
 *   offline queue a command while Redis is down fails at once, so a call answers Unavailable
 *   instead of hanging until Redis returns.
 * - `patient`: the subscriber and the workers' connections. Their commands wait for the
 *   reconnect (BullMQ's blocking fetch needs `maxRetriesPerRequest: null`), and ioredis
 *   re-subscribes after it.
 * Both reconnect forever, at most a second apart, so the bus recovers by itself soon after
 * Redis does (BullMQ's own default backs off to 20 s).
 */
import type { Socket } from 'node:net';
import type { Cluster, ClusterOptions, default as Redis, RedisOptions } from 'ioredis';
import type { Logger } from '../log';
import { describeRedis, RedisConfig } from '../redis-config';

export { redactUrl } from '../redis-config';

/**
 * ioredis, loaded with the first connection: `toolgate serve` on its embedded bus and `toolgate
 * stdio` never open one, and its ~45 modules cost them ~3 MiB of memory for nothing.
 */
let loaded: typeof import('ioredis') | undefined;
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load, on purpose (above)
const ioredis = (): typeof import('ioredis') => (loaded ??= require('ioredis') as typeof import('ioredis'));

/** One Redis, a Sentinel-managed master or a Cluster: the same commands on each. */
export type RedisClient = Redis | Cluster;

const RECONNECT_MAX_MS = 1000;
const retryStrategy = (times: number) => Math.min(times * 100, RECONNECT_MAX_MS);

export type ConnectionRole = 'failFast' | 'patient';

/**
 * Every Redis connection toolgate opens is built here, from the one configuration: a URL, a
 * master found through Sentinels (ioredis asks them again after every disconnect, and their
 * +switch-master news ends the connection to a demoted master at once), or a Cluster (ioredis
 * follows MOVED and refreshes its slot map after a failover).
 */
export function redisConnection(redis: Readonly<RedisConfig>, role: ConnectionRole, name: string, retry: typeof retryStrategy = retryStrategy): RedisClient {
  const failFast = role === 'failFast';
  const login = {
    connectionName: name,
    ...(redis.username ? { username: redis.username } : {}),
    ...(redis.password ? { password: redis.password } : {}),
    ...(redis.tls ? { tls: {} } : {}),
    maxRetriesPerRequest: failFast ? 0 : null,
    // A command in flight when the connection drops fails instead of being replayed later.
    ...(failFast ? { autoResendUnfulfilledCommands: false } : {}),
  } satisfies RedisOptions;
  switch (redis.topology) {
    case 'url':
      // The URL's own user, password and TLS come first (ioredis fills the rest from here).
      return new (ioredis().default)(redis.url, { ...login, enableOfflineQueue: !failFast, retryStrategy: retry } satisfies RedisOptions);
    case 'sentinel':
      return new (ioredis().default)({
        ...login,
        enableOfflineQueue: !failFast,
        retryStrategy: retry,
        sentinels: redis.sentinels.map((n) => ({ ...n })),
        name: redis.masterName,
        ...(redis.sentinelUsername ? { sentinelUsername: redis.sentinelUsername } : {}),
        ...(redis.sentinelPassword ? { sentinelPassword: redis.sentinelPassword } : {}),
        ...(redis.tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
        failoverDetector: true,
      } satisfies RedisOptions);
    case 'cluster':
      return watchClusterNodes(
        new (ioredis().Cluster)(
          redis.nodes.map((n) => ({ ...n })),
          { redisOptions: login, enableOfflineQueue: !failFast, clusterRetryStrategy: retry } satisfies ClusterOptions,
        ),
      );
  }
}

/** The same command connection on every node of a cluster: coalesced writes per node. */
function watchClusterNodes(cluster: Cluster): Cluster {
  cluster.on('+node', (node: Redis) => coalesceNode(node));
  return cluster;
}

/**
 * Where toolgate's keys live. On a Cluster a Lua script may only touch keys of one hash slot, so
 * every multi-key structure (BullMQ's queues, the watchdog's probe, quota leases and budgets,
 * tasks) is under the hash tag `{toolgate}`: one slot, failover but no spreading of toolgate's
 * own keys. Elsewhere the names are those toolgate always used, so an upgrade keeps its data.
 */
export interface RedisKeyspace {
  /** Prefix of toolgate's own keys: `toolgate:` (on a Cluster `{toolgate}:`). */
  prefix: string;
  /** BullMQ's `prefix` option: its default `bull` (on a Cluster `{toolgate}:bull`). */
  bullPrefix: string;
}

export function redisKeyspace(redis: Readonly<RedisConfig>): RedisKeyspace {
  return redis.topology === 'cluster' ? { prefix: '{toolgate}:', bullPrefix: '{toolgate}:bull' } : { prefix: 'toolgate:', bullPrefix: 'bull' };
}

/**
 * The commands a client sends in one callback of the event loop (with the promise reactions it
 * sets off) leave in one socket write: ioredis writes each command by itself, and every write to
 * Redis's socket is a system call that wakes Redis, whose answers then come back in as many
 * reads. A call's end sends a reply and BullMQ's completion together, a gateway's turn the
 * releases and enqueues of every call it finished or started. Unlike ioredis's auto-pipelining
 * (measured slower: bench/results/2026-11-22-hotpath-fixes.md), no command waits for a later
 * turn: the socket is corked at the first write and uncorked by a next-tick callback, which
 * runs as soon as the current callback and its microtasks are done.
 */
export function coalesceWrites<C extends RedisClient>(client: C): C {
  // A Cluster's nodes are coalesced as it adds them (watchClusterNodes).
  if (client instanceof ioredis().default) coalesceNode(client);
  return client;
}

function coalesceNode(client: Redis): void {
  client.on('connect', () => {
    const socket = client.stream as Socket | undefined;
    if (!socket || typeof socket.cork !== 'function' || coalesced.has(socket)) return;
    coalesced.add(socket);
    const write = socket.write;
    let corked = false;
    const uncork = () => {
      corked = false;
      socket.uncork();
    };
    socket.write = function (this: Socket, ...args: Parameters<Socket['write']>) {
      if (!corked) {
        corked = true;
        socket.cork();
        process.nextTick(uncork);
      }
      return write.apply(this, args);
    } as Socket['write'];
  });
}
const coalesced = new WeakSet<Socket>();

export function failFastConnection(redis: Readonly<RedisConfig>, name: string): RedisClient {
  return redisConnection(redis, 'failFast', name);
}

export function patientConnection(redis: Readonly<RedisConfig>, name: string): RedisClient {
  return redisConnection(redis, 'patient', name);
}

/**
 * A patient connection and every copy made of it (BullMQ duplicates a worker's connection for
 * its blocking fetch), which can all be ended even while Redis is unreachable. ioredis's
 * `disconnect()` leaves a reconnecting client parked forever, its queued commands pending, and
 * BullMQ's `Worker.close()` then waits for its 'end' forever (keeping a timer alive). Ended
 * this way instead, each client gives up at its next reconnect attempt, emits 'end' and fails
 * its queued commands.
 */
export class ConnectionFamily {
  readonly root: RedisClient;
  private readonly members: RedisClient[] = [];
  private ending = false;

  constructor(redis: Readonly<RedisConfig>, name: string) {
    const strategy = (times: number) => (this.ending ? null : retryStrategy(times));
    this.root = redisConnection(redis, 'patient', name, strategy as typeof retryStrategy);
    this.members.push(this.root);
    // Redis.duplicate(options) and Cluster.duplicate(nodes, options): wrapped alike.
    const root = this.root as { duplicate(...args: unknown[]): RedisClient };
    const duplicate = root.duplicate.bind(root);
    root.duplicate = (...args: unknown[]) => {
      const copy = duplicate(...args);
      this.members.push(copy);
      return copy;
    };
  }

  get up(): boolean {
    return this.root.status === 'ready';
  }

  /** Stops reconnecting; resolves once every member that is not connected has ended (at most `timeoutMs`). */
  async endDisconnected(timeoutMs: number): Promise<void> {
    this.ending = true;
    const until = Date.now() + timeoutMs;
    while (this.members.some((m) => m.status !== 'end' && m.status !== 'ready') && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** Resolves when `client` is ready; rejects with a sentence after `timeoutMs`. */
export function waitReady(client: RedisClient, redis: Readonly<RedisConfig>, timeoutMs: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    let lastError = '';
    const onError = (err: Error) => (lastError = err.message);
    const onReady = () => {
      clearTimeout(timer);
      client.off('error', onError);
      resolve();
    };
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      client.off('error', onError);
      reject(
        new Error(
          `cannot reach ${describeRedis(redis)} within ${timeoutMs} ms${lastError ? ` (${lastError})` : ''}; are the TOOLGATE_REDIS_* settings right and Redis running?`,
        ),
      );
    }, timeoutMs);
    client.once('ready', onReady);
    client.on('error', onError);
  });
}

/**
 * Logs each connection's losses and recoveries once (not every reconnect attempt), and keeps
 * ioredis from printing "Unhandled error event".
 */
const closing = new WeakSet<RedisClient>();

export function watchConnection(client: RedisClient, label: string, log: Logger): void {
  let down = false;
  client.on('error', (err: Error) => {
    if (!down) log.debug({ connection: label, err: err.message }, 'redis connection error');
  });
  client.on('close', () => {
    if (!down && !closing.has(client)) log.warn({ connection: label }, 'lost the connection to Redis; reconnecting');
    down = true;
  });
  client.on('ready', () => {
    if (down) log.info({ connection: label }, 'reconnected to Redis');
    down = false;
  });
}

/** QUIT if connected, else just drop the socket; never throws. */
export async function closeConnection(client: RedisClient): Promise<void> {
  if (client.status === 'end') return;
  closing.add(client);
  if (client.status === 'ready') {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([client.quit(), new Promise((r) => (timer = setTimeout(r, 1000)))]);
    } catch {
      // fall through to disconnect
    } finally {
      clearTimeout(timer);
    }
  }
  client.disconnect(false);
}

/** `promise`, or a rejection once `ms` have passed. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
