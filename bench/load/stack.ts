/**
 * The deployment the load test drives, all on 127.0.0.1: a private redis-server, `toolgate
 * serve` as the gateway (with TOOLGATE_REDIS_URL it only enqueues) and `toolgate executor`
 * processes, one per shard, so each tenant's calls reach the one executor holding its sandbox.
 * Tenants are named so that they spread evenly over the shards, and each gets its own token.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type * as Token from '../../shared/auth/token';
import type * as BullMq from '../../shared/bus/bullmq';
import type * as TenantNames from '../../executor/tenant-names';
import { startRedis, BenchRedis } from '../lib/redis';
import { productModule, serveNodeFlags, TOOLGATE_BIN } from '../lib/product';
import { baseEnv, freePort, Service, startService, waitForHttp } from '../lib/services';

export interface LoadStackOptions {
  executors: number;
  tenants: number;
  sandbox: string;
}

export interface LoadStack {
  url: string;
  redis: BenchRedis;
  gateway: Service;
  executors: Service[];
  /** Tenant → bearer token. */
  tokens: Map<string, string>;
  /** Host path of a tenant's workspace. */
  workspaceOf(tenant: string): string;
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

export async function startLoadStack(options: LoadStackOptions): Promise<LoadStack> {
  const services: Service[] = [];
  let redis: BenchRedis | undefined;
  const dataDir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-load-')));
  // bwrap opens each workspace as the tenant's uid: the data directory must be searchable.
  await fs.chmod(dataDir, 0o711);
  const close = async () => {
    for (const s of [...services].reverse()) await s.stop();
    await redis?.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  };
  try {
    redis = await startRedis();
    const port = await freePort();
    const secret = randomBytes(32).toString('hex');
    const env = baseEnv({
      TOOLGATE_HOST: '127.0.0.1',
      TOOLGATE_PORT: String(port),
      TOOLGATE_JWT_SECRET: secret,
      TOOLGATE_DATA_DIR: dataDir,
      TOOLGATE_REDIS_URL: redis.url,
      TOOLGATE_SHARDS: String(options.executors),
      TOOLGATE_SANDBOX: options.sandbox,
      TOOLGATE_LOG_LEVEL: 'warn',
      // Eight callers per identity calling back to back: the per-identity limits are not under test.
      TOOLGATE_CALLS_PER_MINUTE: '100000000',
      TOOLGATE_MAX_CONCURRENT_CALLS: '4096',
    });
    const executors: Service[] = [];
    for (let i = 0; i < options.executors; i++) {
      const e = startService(`toolgate executor #${i}`, process.execPath, [TOOLGATE_BIN, 'executor'], {
        ...env,
        TOOLGATE_EXECUTOR_SHARDS: String(i),
        TOOLGATE_EXECUTOR_ID: `load-${i}`,
      });
      executors.push(e);
      services.push(e);
    }
    const gateway = startService('toolgate serve', process.execPath, [TOOLGATE_BIN, 'serve'], env, undefined, serveNodeFlags());
    services.push(gateway);
    const url = `http://127.0.0.1:${port}/`;
    await waitForHttp(gateway, `${url}readyz`);

    const { signToken } = productModule<typeof Token>('shared/auth/token');
    const { workspaceName } = productModule<typeof TenantNames>('executor/tenant-names');
    const iat = Math.floor(Date.now() / 1000) - 5;
    const tokens = new Map(
      spreadTenants(options.tenants, options.executors).map((id) => [id, signToken({ id, permissions: PERMISSIONS, iat, exp: iat + 86_400 }, secret)]),
    );
    return { url, redis, gateway, executors, tokens, workspaceOf: (tenant) => path.join(dataDir, 'workspaces', workspaceName(tenant)), close };
  } catch (err) {
    await close();
    throw err;
  }
}
