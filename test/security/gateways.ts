/**
 * The two HTTP setups the attack sets run against, behind one small interface:
 *
 *   in-process — test/gateway/harness.ts: the gateway with the in-process bus and an executor
 *                running each tenant's tools in a `none` sandbox agent;
 *   bullmq     — the gateway on a BullMQ bus over a real Redis (test/helpers/redis.ts), and a
 *                real executor (startExecutor, sandbox `none`) on its own bus connection, as
 *                `toolgate serve` + `toolgate executor` would run.
 *
 * Both listen on 127.0.0.1 only and keep every tenant workspace under one data directory, so a
 * test can search all of them for a file an attack tried to write.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { startExecutor } from '../../executor/executor';
import { createAuthenticators } from '../../gateway/auth/index';
import { createGateway } from '../../gateway/gateway';
import { listen } from '../../gateway/listen';
import { PERMISSIONS } from '../../shared/auth/permissions';
import { signToken } from '../../shared/auth/token';
import type { Bus } from '../../shared/bus/bus';
import { createBullMqBus } from '../../shared/bus/bullmq';
import type { BusEvent } from '../../shared/bus/events';
import { loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/log';
import { startTestGateway } from '../gateway/harness';
import { startRedis } from '../helpers/redis';

export type GatewaySetup = 'in-process' | 'bullmq';

export interface Claims {
  id?: string;
  permissions?: readonly string[];
  iat?: number;
  exp?: number;
}

export interface AttackGateway {
  readonly setup: GatewaySetup;
  /** `http://127.0.0.1:PORT/` */
  readonly url: string;
  /** The token signing secret. */
  readonly secret: string;
  /** A valid token (HS256, the gateway's secret) unless the claims or the key make it otherwise. */
  token(claims?: Claims, key?: string): string;
  /** Revokes `id`'s tokens issued before `notBefore` from another bus connection, as `toolgate revoke` does, and waits until the gateway knows. */
  revoke(id: string, notBeforeSeconds: number): Promise<void>;
  /** Every path named `name` under the tenant workspaces (all tenants). */
  find(name: string): Promise<string[]>;
  /**
   * job.* events the gateway's bus has seen (a job that was queued, started or ended). On BullMQ
   * only the gateway's own `job.enqueued`, which it sees at once: the executor's events reach it in
   * batches, so an earlier call's could arrive during a later probe.
   */
  jobEvents(): number;
  close(): Promise<void>;
}

const silent = createLogger('silent');
const isJob = (e: BusEvent) => e.type.startsWith('job.');

export async function startAttackGateway(setup: GatewaySetup, env: Record<string, string> = {}): Promise<AttackGateway> {
  return setup === 'in-process' ? inProcess(env) : bullmq(env);
}

async function inProcess(env: Record<string, string>): Promise<AttackGateway> {
  const gw = await startTestGateway({ env });
  const workspaces = path.dirname(gw.workspaceOf('anyone'));
  return {
    setup: 'in-process',
    url: gw.url,
    secret: gw.secret,
    token: (claims, key) => gw.token(claims, key),
    revoke: (id, notBefore) => gw.bus.revocations.revoke(id, notBefore),
    find: (name) => findUnder(workspaces, name),
    jobEvents: () => gw.events.filter(isJob).length,
    close: () => gw.close(),
  };
}

async function bullmq(env: Record<string, string>): Promise<AttackGateway> {
  const cleanups: Array<() => Promise<unknown>> = [];
  const close = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  };
  try {
    const redis = await startRedis();
    cleanups.push(() => redis.close());
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-attack-bullmq-'));
    cleanups.push(() => fs.rm(dataDir, { recursive: true, force: true }));
    const secret = randomBytes(32).toString('base64url');
    const config = loadConfig(
      {
        TOOLGATE_DATA_DIR: dataDir,
        TOOLGATE_JWT_SECRET: secret,
        TOOLGATE_LOG_LEVEL: 'silent',
        TOOLGATE_REDIS_URL: redis.url,
        TOOLGATE_SANDBOX: 'none',
        ...env,
      },
      dataDir,
    );
    // Two connections, as two processes would have: the gateway's and the executor's.
    const executorBus: Bus = await createBullMqBus(config, silent);
    cleanups.push(() => executorBus.close());
    const executor = await startExecutor({ config, bus: executorBus, log: silent });
    cleanups.push(() => executor.close());
    const gatewayBus: Bus = await createBullMqBus(config, silent);
    cleanups.push(() => gatewayBus.close());
    const events: BusEvent[] = [];
    gatewayBus.subscribe((e) => events.push(e));
    const gateway = createGateway({
      config,
      bus: gatewayBus,
      authenticators: createAuthenticators({ secret, revocations: gatewayBus.revocations }),
      log: silent,
      processMetrics: false,
    });
    cleanups.push(() => gateway.close());
    const listening = await listen(gateway.app, '127.0.0.1', 0);
    cleanups.push(() => listening.close(0));
    return {
      setup: 'bullmq',
      url: listening.url,
      secret,
      token: (claims, key) => sign(claims, key ?? secret),
      async revoke(id, notBefore) {
        await executorBus.revocations.revoke(id, notBefore);
        const until = Date.now() + 10_000;
        while ((gatewayBus.revocations.notBefore(id) ?? 0) < notBefore) {
          if (Date.now() > until) throw new Error(`the gateway did not learn of ${id}'s revocation within 10 s`);
          await new Promise((r) => setTimeout(r, 20));
        }
      },
      find: (name) => findUnder(path.join(dataDir, 'workspaces'), name),
      jobEvents: () => events.filter((e) => e.type === 'job.enqueued').length,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

function sign(claims: Claims = {}, key: string): string {
  const iat = claims.iat ?? Math.floor(Date.now() / 1000);
  return signToken({ id: claims.id ?? 'alice', permissions: claims.permissions ?? [...PERMISSIONS], iat, exp: claims.exp ?? iat + 3600 }, key);
}

/** Paths named `name` anywhere below `dir` ([] when `dir` does not exist yet). */
export async function findUnder(dir: string, name: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { recursive: true }).catch(() => [] as string[]);
  return entries.filter((e) => path.basename(e) === name).map((e) => path.join(dir, e));
}
