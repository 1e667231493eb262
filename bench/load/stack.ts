/**
 * The deployment the load test drives, all on 127.0.0.1: `toolgate serve` as the gateway (on
 * Redis it only enqueues) and `toolgate executor` processes sharing one data directory. Tenants
 * are named so that they spread evenly over the shards, and each gets its own token.
 *
 * Normal: a private redis-server and one executor per shard. With `faults`: Redis under Sentinel
 * (bench/lib/redis-ha.ts) and executors that lease shards: executor i < shards is the candidate for
 * shard i alone and is started first, so that it holds that lease; the others are candidates for
 * every shard and stand by (a takeover goes to one of them).
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type * as Token from '../../shared/auth/token';
import type * as BullMq from '../../shared/bus/bullmq';
import type * as RedisConnections from '../../shared/bus/redis-connections';
import type * as ShardLeases from '../../shared/bus/shard-leases';
import type * as TenantNames from '../../executor/tenant-names';
import { startRedis, BenchRedis } from '../lib/redis';
import { adminCall, RedisHa, startSentinelGroup } from '../lib/redis-ha';
import { productModule, serveNodeFlags, TOOLGATE_BIN } from '../lib/product';
import { baseEnv, freePort, Service, startService, waitForHttp } from '../lib/services';

export interface LoadStackOptions {
  executors: number;
  tenants: number;
  sandbox: string;
  /** Redis under Sentinel and leased shards (more executors than shards: the rest stand by). */
  faults?: { shards: number; leaseMs: number | undefined };
}

export interface LoadStack {
  url: string;
  /** The single Redis (normal), or the Sentinel group (faults). */
  redis: BenchRedis | undefined;
  ha: RedisHa | undefined;
  gateway: Service;
  executors: Service[];
  /** TOOLGATE_EXECUTOR_ID of each executor, in the order of `executors`. */
  executorIds: string[];
  shards: number;
  /** Tenant → bearer token. */
  tokens: Map<string, string>;
  /** Host path of a tenant's workspace. */
  workspaceOf(tenant: string): string;
  /** The TOOLGATE_EXECUTOR_ID holding a shard's lease now (faults only), undefined if none. */
  leaseHolder(shard: number): Promise<string | undefined>;
  close(): Promise<void>;
}

const PERMISSIONS = ['file:read', 'file:write', 'file:list', 'system:exec'];

/** `count` tenant names, as evenly spread over `shards` as the bus's own hash puts them. */
export function spreadTenants(count: number, shards: number): string[] {
  const { shardOf } = productModule<typeof BullMq>('shared/bus/bullmq');
  const perShard = Math.ceil(count / shards);
  const taken = new Map<number, number>();
  const names: string[] = [];
  for (let i = 0; names.length < count && i < count * 1000; i++) {
    const name = `load-tenant-${i}`;
    const shard = shardOf(name, shards);
    if ((taken.get(shard) ?? 0) >= perShard) continue;
    taken.set(shard, (taken.get(shard) ?? 0) + 1);
    names.push(name);
  }
  return names;
}

async function until(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startLoadStack(options: LoadStackOptions): Promise<LoadStack> {
  const services: Service[] = [];
  let redis: BenchRedis | undefined;
  let ha: RedisHa | undefined;
  const dataDir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-load-')));
  // bwrap opens each workspace as the tenant's uid: the data directory must be searchable.
  await fs.chmod(dataDir, 0o711);
  const close = async () => {
    for (const s of [...services].reverse()) await s.stop();
    await redis?.close();
    await ha?.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  };
  try {
    const { faults } = options;
    const shards = faults?.shards ?? options.executors;
    let redisEnv: Record<string, string>;
    if (faults) {
      ha = await startSentinelGroup();
      redisEnv = ha.env;
    } else {
      redis = await startRedis();
      redisEnv = { TOOLGATE_REDIS_URL: redis.url };
    }
    const port = await freePort();
    const secret = randomBytes(32).toString('hex');
    const env = baseEnv({
      TOOLGATE_HOST: '127.0.0.1',
      TOOLGATE_PORT: String(port),
      TOOLGATE_JWT_SECRET: secret,
      TOOLGATE_DATA_DIR: dataDir,
      ...redisEnv,
      TOOLGATE_SHARDS: String(shards),
      TOOLGATE_SANDBOX: options.sandbox,
      TOOLGATE_LOG_LEVEL: 'warn',
      // Eight callers per identity calling back to back: the per-identity limits are not under test.
      TOOLGATE_CALLS_PER_MINUTE: '100000000',
      TOOLGATE_MAX_CONCURRENT_CALLS: '4096',
      // A taking-over executor serves the workspaces of the shared data directory; a loop-mounted
      // quota image per workspace would be mounted a second time there (as in test/faults).
      ...(faults ? { TOOLGATE_WORKSPACE_QUOTA_BYTES: '0' } : {}),
      ...(faults?.leaseMs !== undefined ? { TOOLGATE_SHARD_LEASE_MS: String(faults.leaseMs) } : {}),
    });
    const executors: Service[] = [];
    const executorIds: string[] = [];
    const startExecutor = (i: number) => {
      const id = `load-${i}`;
      const e = startService(`toolgate executor #${i}`, process.execPath, [TOOLGATE_BIN, 'executor'], {
        ...env,
        TOOLGATE_EXECUTOR_SHARDS: i < shards ? String(i) : 'all',
        TOOLGATE_EXECUTOR_ID: id,
      });
      executors.push(e);
      executorIds.push(id);
      services.push(e);
    };

    const leaseHolder = async (shard: number): Promise<string | undefined> => {
      if (!ha) return undefined;
      const { redisKeyspace } = productModule<typeof RedisConnections>('shared/bus/redis-connections');
      const { shardLeaseKey } = productModule<typeof ShardLeases>('shared/bus/shard-leases');
      const value = await adminCall(await ha.masterPort(), 'GET', shardLeaseKey(redisKeyspace(ha.config).prefix, shard));
      return typeof value === 'string' ? value.split(' ')[0] : undefined;
    };
    for (let i = 0; i < Math.min(shards, options.executors); i++) startExecutor(i);
    if (faults) {
      // The standbys start once every shard is held by its own executor, so that they stand by.
      for (let s = 0; s < shards; s++) await until(`executor load-${s} to take shard ${s}'s lease`, 60_000, async () => (await leaseHolder(s)) === `load-${s}`);
    }
    for (let i = shards; i < options.executors; i++) startExecutor(i);

    const gateway = startService('toolgate serve', process.execPath, [TOOLGATE_BIN, 'serve'], env, undefined, serveNodeFlags());
    services.push(gateway);
    const url = `http://127.0.0.1:${port}/`;
    await waitForHttp(gateway, `${url}readyz`);

    const { signToken } = productModule<typeof Token>('shared/auth/token');
    const { workspaceName } = productModule<typeof TenantNames>('executor/tenant-names');
    const iat = Math.floor(Date.now() / 1000) - 5;
    const tokens = new Map(
      spreadTenants(options.tenants, shards).map((id) => [id, signToken({ id, permissions: PERMISSIONS, iat, exp: iat + 86_400 }, secret)]),
    );
    return {
      url,
      redis,
      ha,
      gateway,
      executors,
      executorIds,
      shards,
      tokens,
      workspaceOf: (tenant) => path.join(dataDir, 'workspaces', workspaceName(tenant)),
      leaseHolder,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
