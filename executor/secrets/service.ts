/**
 * Secrets as one executor uses them: the store (on the bus's Redis, else in the data directory:
 * the one `toolgate secret set` writes), opened per request so a change applies to the next one;
 * the record of every use (an audit line and a `secret.used` bus event, never the value); the
 * per-executor certificate authority the egress proxy intercepts TLS with; and the faces the rest
 * of the executor uses:
 *  - `broker`: http_request's (TrustedContext.secrets);
 *  - `egress`: the proxy channel's hook (EgressChannelOptions.secrets);
 *  - `commandArgs`: a command's arguments with each secret name as a variable holding its
 *    placeholder, asked per call so a secret added later is there at the next command.
 * A missing or wrong TOOLGATE_SECRETS_KEY is reported once at start and refuses secret use with
 * its sentence; everything else works as without secrets.
 */
import * as path from 'node:path';
import type * as tls from 'node:tls';
import { closeConnection, failFastConnection, RedisClient, waitReady, watchConnection } from '../../shared/bus/redis-connections';
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';
import { SecretBroker, SecretsUnavailable, SecretUsedEvent } from '../../shared/secrets/broker';
import { placeholderEnv } from '../../shared/secrets/placeholder';
import { SecretSet } from '../../shared/secrets/secret-set';
import { readUpstreamCa, upstreamTrust } from '../../shared/tools/http/policy';
import { fileSecretBackend, redisSecretBackend } from './backends';
import type { CertificateAuthority } from './ca';
import { createSecretStore, SecretStore } from './store';
import { writeTrustBundle } from './trust';

/** What an egress channel asks (executor/egress/proxy.ts `secrets`). */
export interface ChannelSecrets {
  /** The tenant's secrets when one of them is bound to host:port; undefined otherwise, or when secrets cannot be used. */
  forTarget(tenant: string, host: string, port: number): Promise<SecretSet | undefined>;
  used: SecretBroker['used'];
  /** The TLS context a sandbox is shown for `host` (a leaf signed by this executor's CA, made on first use). */
  serverContext(host: string): Promise<tls.SecureContext>;
  /**
   * What upstream TLS verifies the real host with, made once (`upstreamTrust`): what Node trusts
   * by default plus TOOLGATE_EGRESS_CA_FILE; undefined without that file (Node's defaults apply).
   */
  readonly upstreamTls: tls.SecureContext | undefined;
}

export interface SecretService {
  readonly broker: SecretBroker;
  /** Undefined when secrets are off (the proxy then never intercepts). */
  readonly egress: ChannelSecrets | undefined;
  /** The CA certificate file (undefined when secrets are off). */
  readonly caCertFile: string | undefined;
  /**
   * System roots + the CA (trust.ts), for a sandbox to read (undefined when secrets are off). The
   * backend puts it in the sandbox and adds `trustEnv(itsPathThere)` to every command.
   */
  readonly caBundleFile: string | undefined;
  /** `args` of run_command / start_process with the tenant's secret names added to `env` (caller's own win). */
  commandArgs(tenant: string, tool: string, args: unknown): Promise<unknown>;
  /** Closes the Redis connection the service opened. */
  close(): Promise<void>;
}

export interface SecretServiceOptions {
  config: Readonly<Config>;
  log: Logger;
  /** A Redis connection to use instead of opening one when TOOLGATE_REDIS_URL is set (the caller's; not closed here). */
  redis?: RedisClient;
  /** Every use (the bus and the audit log). Must not throw. */
  onUse: (event: SecretUsedEvent) => void;
  /**
   * Upstream TLS's trust, when the caller built it (the executor, once for this and
   * http_request); else it is built here from TOOLGATE_EGRESS_CA_FILE the same way.
   */
  upstreamTls?: tls.SecureContext;
}

/** The tools whose `env` gets the tenant's secret names. */
export const SECRET_ENV_TOOLS: ReadonlySet<string> = new Set(['run_command', 'start_process']);

/** Writes one audit line per use: who, which secret, where, by which tool. Never the value. */
export function secretAuditor(parent: Logger): (event: SecretUsedEvent) => void {
  const quieterThanInfo = parent.level !== 'silent' && parent.levelVal > parent.levels.values.info!;
  const log = parent.child({ audit: true }, { level: quieterThanInfo ? 'info' : parent.level, redact: [] });
  return ({ tenant, name, host, port, tool }) => log.info({ event: 'secret.used', identity: tenant, secret: name, host, port, tool }, 'secret used');
}

const REDIS_READY_MS = 10_000;

export async function startSecretService({ config, log, onUse, ...given }: SecretServiceOptions): Promise<SecretService> {
  let redis = given.redis;
  const owned = !redis && config.redis ? failFastConnection(config.redis, 'toolgate-secrets') : undefined;
  if (owned && config.redis) {
    watchConnection(owned, 'secret store', log);
    await waitReady(owned, config.redis, REDIS_READY_MS).catch(async (err: unknown) => {
      await closeConnection(owned);
      throw err;
    });
    redis = owned;
  }
  const store: SecretStore = createSecretStore(redis ? redisSecretBackend(redis) : fileSecretBackend(config.dataDir), config.secrets.key);
  let on = false;
  try {
    await store.verifyKey();
    on = true;
  } catch (err) {
    if (!(err instanceof SecretsUnavailable)) throw err;
    // Not set: secrets were never asked for. Set but unusable: the operator must hear it now.
    if (config.secrets.key === undefined) log.debug(err.message);
    else log.warn(err.message);
  }
  // Loaded only with secrets on: the certificate library costs about 15 MiB and 100 ms at load, which
  // an executor (or an embedding `serve`) without secrets should not pay.
  const ca: CertificateAuthority | undefined = on ? await (await import('./ca')).loadCertificateAuthority(config.dataDir) : undefined;
  const upstreamTls = ca ? (given.upstreamTls ?? upstreamTrust(await readUpstreamCa(config.egress.caFile))) : undefined;

  const broker: SecretBroker = {
    async open(tenant) {
      return new SecretSet(tenant, await store.open(tenant));
    },
    used(event) {
      try {
        onUse({ type: 'secret.used', ...event, at: Date.now() });
      } catch {
        // A record that cannot be written must not fail the request it describes.
      }
    },
  };
  const egress: ChannelSecrets | undefined = ca && {
    async forTarget(tenant, host, port) {
      let set: SecretSet;
      try {
        set = await broker.open(tenant);
      } catch {
        return undefined;
      }
      return set.forHost(host, port).length > 0 ? set : undefined;
    },
    used: broker.used,
    serverContext: (host) => ca.contextFor(host),
    upstreamTls,
  };

  return {
    broker,
    egress,
    caCertFile: ca?.certFile,
    caBundleFile: ca ? await writeTrustBundle(path.join(config.dataDir, 'egress-ca-public'), ca.certPem) : undefined,
    async commandArgs(tenant, tool, args) {
      if (!on || !SECRET_ENV_TOOLS.has(tool) || typeof args !== 'object' || args === null) return args;
      let names: string[];
      try {
        names = await store.names(tenant);
      } catch {
        return args;
      }
      if (names.length === 0) return args;
      const env = (args as { env?: Record<string, string> }).env;
      return { ...args, env: { ...placeholderEnv(names), ...env } };
    },
    async close() {
      if (owned) await closeConnection(owned);
    },
  };
}
