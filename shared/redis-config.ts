/**
 * Where Redis is and how to log in, read from the environment by `loadConfig` (config.ts): one
 * Redis by URL, a Sentinel-managed master, or a Cluster. Every Redis user (bus, quotas, tasks,
 * revocations, egress policies) connects through `redisConnection` (bus/redis-connections.ts)
 * with these settings, so they all follow the same master through a failover.
 */
export interface RedisNode {
  host: string;
  port: number;
}

/** Credentials and transport, the same for every node (and, for Sentinel, the data nodes). */
export interface RedisAuth {
  /** TOOLGATE_REDIS_USERNAME: an ACL user (Redis 6+); unset → `default`. A URL's own user wins. */
  username: string | undefined;
  /** TOOLGATE_REDIS_PASSWORD: the data nodes' password. A URL's own password wins. */
  password: string | undefined;
  /** TOOLGATE_REDIS_TLS (default off; `rediss://` turns it on for a URL): TLS to every node, Sentinels included. */
  tls: boolean;
}

export type RedisConfig = RedisAuth &
  (
    | {
        /** TOOLGATE_REDIS_URL: `redis://[user:password@]host:port[/db]` or `rediss://` for TLS. */
        topology: 'url';
        url: string;
      }
    | {
        topology: 'sentinel';
        /** TOOLGATE_REDIS_SENTINELS: `host:port,…`, asked in turn where the master is. */
        sentinels: readonly RedisNode[];
        /** TOOLGATE_REDIS_SENTINEL_MASTER: the master's name in the Sentinels' configuration. */
        masterName: string;
        /** TOOLGATE_REDIS_SENTINEL_USERNAME / _PASSWORD: the Sentinels' own login (`requirepass` / ACL in sentinel.conf). */
        sentinelUsername: string | undefined;
        sentinelPassword: string | undefined;
      }
    | {
        topology: 'cluster';
        /** TOOLGATE_REDIS_CLUSTER_NODES: `host:port,…`, some of the cluster's nodes (the rest are discovered). */
        nodes: readonly RedisNode[];
      }
  );

type Env = Readonly<Record<string, string | undefined>>;

/** The error `loadConfig` turns into its ConfigError. */
type Fail = (message: string) => never;

/** The Redis settings, or undefined when no Redis is configured (the in-process bus). */
export function redisConfig(env: Env, fail: Fail): Readonly<RedisConfig> | undefined {
  const url = text(env, 'TOOLGATE_REDIS_URL');
  const sentinels = text(env, 'TOOLGATE_REDIS_SENTINELS');
  const cluster = text(env, 'TOOLGATE_REDIS_CLUSTER_NODES');
  const given = [url && 'TOOLGATE_REDIS_URL', sentinels && 'TOOLGATE_REDIS_SENTINELS', cluster && 'TOOLGATE_REDIS_CLUSTER_NODES'].filter(Boolean);
  if (given.length > 1) fail(`set only one of ${given.join(', ')}: they are three ways to name the same Redis`);
  const auth: RedisAuth = {
    username: text(env, 'TOOLGATE_REDIS_USERNAME'),
    password: env.TOOLGATE_REDIS_PASSWORD || undefined,
    tls: flag(env, 'TOOLGATE_REDIS_TLS', fail),
  };
  if (url) {
    if (!/^rediss?:\/\//.test(url)) fail(`TOOLGATE_REDIS_URL must start with redis:// or rediss://, got "${redactUrl(url)}"`);
    return Object.freeze({ ...auth, tls: auth.tls || url.startsWith('rediss://'), topology: 'url', url });
  }
  if (sentinels) {
    const masterName = text(env, 'TOOLGATE_REDIS_SENTINEL_MASTER');
    if (!masterName) fail('TOOLGATE_REDIS_SENTINELS needs TOOLGATE_REDIS_SENTINEL_MASTER: the name the Sentinels know the master by');
    return Object.freeze({
      ...auth,
      topology: 'sentinel',
      sentinels: nodes('TOOLGATE_REDIS_SENTINELS', sentinels, fail),
      masterName,
      sentinelUsername: text(env, 'TOOLGATE_REDIS_SENTINEL_USERNAME'),
      sentinelPassword: env.TOOLGATE_REDIS_SENTINEL_PASSWORD || undefined,
    });
  }
  if (cluster) return Object.freeze({ ...auth, topology: 'cluster', nodes: nodes('TOOLGATE_REDIS_CLUSTER_NODES', cluster, fail) });
  return undefined;
}

/** Where Redis is, for messages and logs (never a password). */
export function describeRedis(redis: Readonly<RedisConfig>): string {
  const list = (ns: readonly RedisNode[]) => ns.map((n) => `${n.host}:${n.port}`).join(',');
  switch (redis.topology) {
    case 'url':
      return `Redis at ${redactUrl(redis.url)}`;
    case 'sentinel':
      return `the Redis master "${redis.masterName}" of the Sentinels ${list(redis.sentinels)}`;
    case 'cluster':
      return `the Redis Cluster at ${list(redis.nodes)}`;
  }
}

/** The URL without its password, for messages and logs. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

function text(env: Env, name: string): string | undefined {
  return env[name]?.trim() || undefined;
}

function flag(env: Env, name: string, fail: Fail): boolean {
  const raw = text(env, name)?.toLowerCase();
  if (raw === undefined || raw === '0' || raw === 'false' || raw === 'off') return false;
  if (raw === '1' || raw === 'true' || raw === 'on') return true;
  return fail(`${name} must be on or off (1/0, true/false), got "${env[name]}"`);
}

function nodes(name: string, raw: string, fail: Fail): readonly RedisNode[] {
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return Object.freeze(
    items.map((item) => {
      // host:port, [v6]:port
      const m = /^(\[[^\]]+\]|[^:\s]+):(\d{1,5})$/.exec(item);
      const port = m ? Number(m[2]) : 0;
      if (!m || port < 1 || port > 65535) return fail(`${name} must be comma-separated host:port pairs, got "${item}"`);
      return Object.freeze({ host: m[1]!.replace(/^\[|\]$/g, ''), port });
    }),
  );
}
