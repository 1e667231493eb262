/**
 * The executor: takes tool calls off the bus and runs them — file and command tools in the
 * caller's own sandbox (one per tenant, see TenantPool), http_request here, behind the SSRF
 * guard. Embedded in `toolgate serve` (in-process bus) or run alone as `toolgate executor`
 * (Redis bus), any number of them against one Redis.
 *
 * Tenant affinity: a tenant's sandbox, and so its start_process handles, live on one executor.
 * Routing a tenant's jobs to the executor holding its sandbox is the bus's part (tenant → one
 * of TOOLGATE_SHARDS queues by hash; each shard served by the one executor holding its lease,
 * shared/bus/shard-leases.ts). When a standby takes a dead executor's shards over, the tenants'
 * workspaces must be reachable from it: workspace-homes.ts refuses a call whose workspace lives
 * in another data directory, naming the executor that has it, rather than serve an empty one.
 * Executors sharing one data directory (one host, or shared storage) serve each other's tenants.
 */
import type { Bus, JobHandler } from '../shared/bus/bus';
import type { Config } from '../shared/config';
import type { Logger } from '../shared/log';
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';
import { createQuotaStore } from '../shared/quota/index';
import { createHttpPolicy, readUpstreamCa, upstreamTrust } from '../shared/tools/http/policy';
import { ALL_TOOLS } from '../shared/tools/index';
import { LocalToolRunner } from '../shared/tools/local-runner';
import { ToolRegistry } from '../shared/tools/registry';
import { egressAuditor, startAudit } from './audit';
import { startEgressService } from './egress/service';
import { createJobHandler } from './job-handler';
import { SECRET_ENV_TOOLS, secretAuditor, startSecretService } from './secrets/service';
import { SANDBOX_BACKENDS } from './sandbox/registry';
import { SingleIdentity } from './single-identity';
import { TenantPool } from './tenant-pool';
import { ProcessBudget } from './process-budget';
import { dataDirectoryId, startWorkspaceQuota } from './workspaces';
import { WorkspaceHomes } from './workspace-homes';
import { closeConnection, failFastConnection, redisKeyspace, waitReady, watchConnection } from '../shared/bus/redis-connections';
import { JobRuns } from './job-runs';
import type { SandboxBackend } from './sandbox/backend';

export interface ExecutorDeps {
  config: Readonly<Config>;
  bus: Bus;
  log: Logger;
  /**
   * This executor runs inside `toolgate serve` with the embedded bus (BackendDeps.embedded): on
   * `none` the sandbox tools then run in this process instead of an agent child per tenant. Same
   * checks and limits, one process hop less per call; `none` isolates nothing beyond path checks
   * either way.
   */
  embedded?: boolean;
}

export interface Executor {
  /** Stops taking jobs, lets running ones finish within the shutdown grace, then stops every sandbox. */
  close(): Promise<void>;
}

export async function startExecutor(deps: ExecutorDeps): Promise<Executor> {
  const { config, bus } = deps;
  const log = deps.log.child({ module: 'executor' });
  const registry = new ToolRegistry(ALL_TOOLS);
  // An unknown TOOLGATE_SANDBOX fails here, at start, naming every registered backend.
  const chosen = SANDBOX_BACKENDS.get(config.sandbox);
  const section = chosen.section(config);
  const { secrets, egress, trusted } = await startTrustedSide(config, bus, log);
  const backend = chosen.create(section, {
    role: 'executor',
    log,
    embedded: deps.embedded,
    egress: egress.sandbox,
    onStderr: (line) => log.warn({ sandbox: config.sandbox, line }, 'sandbox agent stderr'),
  });
  await chosen.cleanStale?.(section, log);
  const quota = await startWorkspaceQuota(config, backend.isolating, log);
  // Live processes per identity: on Redis (every executor's count together) when the bus is there.
  const quotas = await createQuotaStore(config);
  const processes = new ProcessBudget(quotas, config.executor.maxProcessesPerIdentity);
  const pool = new TenantPool({
    backend,
    dataDir: config.dataDir,
    limits: quota.limits,
    quota: quota.quota,
    processes,
    idleMs: config.executor.sandboxIdleMs,
    maxSandboxes: config.executor.maxSandboxes,
    uidFor: chosen.uidFor,
    publish: (event) => bus.publish(event),
    log,
  });
  // A backend that cannot run here must fail start-up with its reason, not every first call.
  await pool.probe().catch(async (err: unknown) => {
    await quotas.close();
    await egress.close();
    await secrets.close();
    throw err;
  });
  const admit = singleIdentityOn(backend, config, log);
  // Embedded (no Redis), this is the only executor: it audits every call, those that never
  // started included. On Redis every executor sees every event, so each audits the calls it ran
  // (once per call, however many executors); calls no executor ran (lost, never started) are
  // reported by the gateway's bus as job.failed and are the gateway's to audit.
  const runs = new JobRuns();
  const audit = startAudit({ bus, log, includes: config.redis ? (id) => runs.ranHere(id) : undefined });

  // On Redis, another executor may take this one's shards over: a tenant's workspace must be here.
  const homes = await startWorkspaceHomes(config, log);

  const shutdown = new AbortController();
  const handle = createJobHandler({
    registry,
    trusted,
    sandbox: sandboxCalls(pool, secrets, homes),
    shutdown: shutdown.signal,
  });
  const handler = trackedHandler(handle, runs, admit, log);
  // Shards move between executors only where the tenants' workspaces can follow (same data directory).
  const consumer = await bus
    .consume(handler, {
      concurrency: config.executor.concurrency,
      dataDirId: homes?.dataDirId,
      onHandOver: (moved) => pool.stopMoved(moved),
    })
    .catch(async (err: unknown) => {
      runs.stop();
      audit.stop();
      await homes?.close();
      await pool.close();
      await quotas.close();
      await egress.close();
      await secrets.close();
      throw err;
    });
  log.info(
    { sandbox: backend.name, concurrency: config.executor.concurrency, maxSandboxes: config.executor.maxSandboxes, dataDir: config.dataDir },
    'executor ready',
  );

  let closing: Promise<void> | undefined;
  return {
    close() {
      closing ??= (async () => {
        await consumer.close(config.shutdownGraceMs);
        // Running jobs may finish within the grace time; then they are aborted (OutcomeUnknown: they ran in part).
        await runs.settled(config.shutdownGraceMs);
        shutdown.abort(
          new ProtocolError(
            ErrorCode.OutcomeUnknown,
            'Outcome unknown: the executor is shutting down; the call was stopped while it ran, and may have run in part',
          ),
        );
        await runs.settled();
        await pool.close();
        // After the sandboxes (their processes' leases are returned as they end): releases the rest.
        await quotas.close();
        await homes?.close();
        await egress.close();
        await secrets.close();
        await trusted.close();
        runs.stop();
        // The last jobs' outcome events are delivered asynchronously: let them reach the audit.
        await new Promise((r) => setTimeout(r, 50));
        audit.stop();
        log.info('executor stopped');
      })();
      return closing;
    },
  };
}

/**
 * The bus's job handler: each job tracked in `runs` (audit, shutdown), the single-identity guard
 * first, and a bug's error logged with its cause while the caller hears only "Internal error".
 */
function trackedHandler(handle: JobHandler, runs: JobRuns, admit: ((tenant: string) => void) | undefined, log: Logger): JobHandler {
  return (job, control, onProgress) =>
    runs.track(
      job.id,
      (async () => {
        admit?.(job.tenant);
        return handle(job, control, onProgress);
      })().catch((err: unknown) => {
        if (err instanceof ProtocolError) throw err;
        log.error({ err, tool: job.tool, tenant: job.tenant }, 'job failed unexpectedly');
        throw new ProtocolError(ErrorCode.InternalError, 'Internal error');
      }),
    );
}

/** The workspace records (workspace-homes.ts) on Redis; none embedded (one executor, one data directory). */
async function startWorkspaceHomes(
  config: Readonly<Config>,
  log: Logger,
): Promise<(WorkspaceHomes & { dataDirId: string; close(): Promise<void> }) | undefined> {
  if (!config.redis) return undefined;
  const client = failFastConnection(config.redis, 'toolgate-workspaces');
  watchConnection(client, 'workspace records', log);
  try {
    await waitReady(client, config.redis, 10_000);
    const dataDirId = await dataDirectoryId(config.dataDir);
    const homes = new WorkspaceHomes({ client, prefix: redisKeyspace(config.redis).prefix, executorId: config.executor.id, dataDirId });
    return Object.assign(homes, { dataDirId, close: () => closeConnection(client) });
  } catch (err) {
    await closeConnection(client);
    throw err;
  }
}

/**
 * No wall between tenants on `none`: such an executor serves one identity only
 * (single-identity.ts). Returns what admits a job's tenant, or undefined on an isolating backend.
 */
function singleIdentityOn(backend: SandboxBackend, config: Readonly<Config>, log: Logger): ((tenant: unknown) => void) | undefined {
  if (backend.isolating) return undefined;
  const single = new SingleIdentity(config.executor.noneIdentity);
  log.warn(
    { sandbox: backend.name, identity: single.tenant ?? '(the first that calls)' },
    'sandbox "none": no wall between tenants, so this executor serves one identity and refuses the others; use TOOLGATE_SANDBOX=bwrap or docker for several tenants',
  );
  if (config.egress.allow.length > 0) {
    log.warn('sandbox "none": commands reach the network as this process does; egress rules govern only http_request and isolating sandboxes');
  }
  return (tenant) => {
    if (typeof tenant !== 'string' || tenant.length === 0) return;
    const first = single.tenant === undefined;
    single.admit(tenant);
    if (first) log.warn({ identity: tenant }, 'sandbox "none": serving this identity only from now on');
  };
}

/**
 * What runs on the trusted side of the wall: the secret store (a missing or wrong key is reported
 * and refuses only secret use), governed egress (a bad rule fails start-up), and the runner of
 * trusted tools (http_request, under the tenant's egress policy and with its secrets). Every
 * secret use and egress event goes on the bus and into this executor's audit.
 */
async function startTrustedSide(config: Readonly<Config>, bus: Bus, log: Logger) {
  const auditSecret = secretAuditor(log);
  // TOOLGATE_EGRESS_CA_FILE, read and made a context once for both: the proxy's upstream TLS and http_request's.
  const upstreamTls = upstreamTrust(await readUpstreamCa(config.egress.caFile));
  const secrets = await startSecretService({
    config,
    log,
    upstreamTls,
    onUse: (event) => {
      bus.publish(event);
      auditSecret(event);
    },
  });
  const auditEgress = egressAuditor(log);
  const egress = await startEgressService({
    config,
    log,
    onEvent: (event) => {
      bus.publish(event);
      auditEgress(event);
    },
    secrets: secrets.egress,
    caBundleFile: secrets.caBundleFile,
  });
  const http = createHttpPolicy(config.httpAllow, { egressFor: (tenant) => egress.gateFor(tenant), upstreamTls });
  const trusted = new LocalToolRunner({
    trusted: { limits: config.limits, http, secrets: secrets.broker },
    onUnexpectedError: (err, tool) => log.error({ err, tool }, 'tool failed unexpectedly'),
  });
  return { secrets, egress, trusted };
}

/**
 * How a sandbox tool reaches the tenant's sandbox: once its workspace is known to be here, and
 * with a command's environment naming the tenant's secrets (placeholders only), read per call so
 * that one added later is there at once.
 */
function sandboxCalls(
  pool: TenantPool,
  secrets: { commandArgs(tenant: string, tool: string, args: unknown): Promise<unknown> },
  homes: { check(tenant: string): Promise<void> } | undefined,
) {
  const run = (tenant: string, tool: string, args: unknown, signal: AbortSignal, onProgress?: (message: string) => void) =>
    SECRET_ENV_TOOLS.has(tool)
      ? secrets.commandArgs(tenant, tool, args).then((withNames) => pool.call(tenant, tool, withNames, signal, onProgress))
      : pool.call(tenant, tool, args, signal, onProgress);
  // Embedded there is one data directory and no record to check: no promise hop on every call.
  if (!homes) return run;
  return (tenant: string, tool: string, args: unknown, signal: AbortSignal, onProgress?: (message: string) => void) =>
    homes.check(tenant).then(() => run(tenant, tool, args, signal, onProgress));
}
