/**
 * Governed egress as one executor runs it: the settings parsed from the config at start (a bad
 * rule fails start-up naming its variable), the per-tenant policy store (on the bus's Redis, else
 * in the data directory: the one `toolgate egress set` writes), one accounting for every channel
 * (limits per tenant across its sandboxes), and the two faces the rest of the executor uses:
 *  - `sandbox`: what the docker and bwrap backends open per sandbox (BackendDeps.egress);
 *  - `gateFor`: the tenant's gate for http_request, which shares the proxy's rules and pins.
 */
import * as path from 'node:path';
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';
import { closeConnection, failFastConnection, RedisClient, waitReady, watchConnection } from '../../shared/bus/redis-connections';
import type { EgressGate } from '../../shared/tools/http/policy';
import type { SandboxEgress } from '../sandbox/egress-mount';
import { checkEgressBaseDir } from '../sandbox/egress-mount';
import { createEgressAccounting } from './accounting';
import type { EgressEvent } from './events';
import { egressFromConfig } from './index';
import { filePolicyStore, policyLookup, redisPolicyStore } from './policy-store';
import { openEgressChannel } from './proxy';
import type { ChannelSecrets } from '../secrets/service';
import { createEgressResolver } from './resolver';

export interface EgressService {
  readonly sandbox: SandboxEgress;
  /**
   * The tenant's gate for http_request when egress governs that tenant (its own policy, or any
   * default rule); undefined otherwise. Rejects when the store cannot be read.
   */
  gateFor(tenant: string): Promise<EgressGate | undefined>;
  close(): Promise<void>;
}

export interface EgressServiceOptions {
  config: Readonly<Config>;
  log: Logger;
  /** Every refusal and finished connection (the bus and the audit log). Must not throw. */
  onEvent: (event: EgressEvent) => void;
  /** Credential brokering on every channel (executor/secrets/service.ts), when the executor has a secret store. */
  secrets?: ChannelSecrets;
  /** The trust bundle for intercepted TLS, copied into every sandbox (SandboxEgress.caBundleFile). */
  caBundleFile?: string;
}

const REDIS_READY_MS = 10_000;

export async function startEgressService({ config, log, onEvent, secrets, caBundleFile }: EgressServiceOptions): Promise<EgressService> {
  const settings = egressFromConfig(config.egress);
  const baseDir = path.join(config.dataDir, 'egress');
  checkEgressBaseDir(baseDir);
  let redis: RedisClient | undefined;
  if (config.redis) {
    redis = failFastConnection(config.redis, 'toolgate-egress');
    watchConnection(redis, 'egress policies', log);
    try {
      await waitReady(redis, config.redis, REDIS_READY_MS);
    } catch (err) {
      await closeConnection(redis);
      throw err;
    }
  }
  const store = redis ? redisPolicyStore(redis) : filePolicyStore(config.dataDir);
  const policies = policyLookup(store, settings.defaults);
  const resolver = createEgressResolver({ pins: settings.pins });
  const accounting = createEgressAccounting({ limits: settings.limits, onEvent });
  const governsByDefault = settings.defaults.allow.length > 0 || settings.defaults.deny.length > 0;

  return {
    sandbox: {
      baseDir,
      open: (tenant, socketPath) => openEgressChannel({ tenant, socketPath, policies, resolver, accounting, secrets }),
      caBundleFile,
    },
    async gateFor(tenant) {
      const { policy, source } = await policies(tenant);
      if (source === 'default' && !governsByDefault) return undefined;
      return { decide: (target) => policy.decide(target), isPinned: (host) => resolver.isPinned(host), resolve: (host) => resolver.resolve(host) };
    },
    async close() {
      if (redis) await closeConnection(redis);
    },
  };
}
