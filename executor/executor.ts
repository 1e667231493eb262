/**
 * The executor: takes tool calls off the bus and runs them — file and command tools in the
 * caller's own sandbox (one per tenant, see TenantPool), http_request here, behind the SSRF
 * guard. Embedded in `toolgate serve` (in-process bus) or run alone as `toolgate executor`
 * (Redis bus), any number of them against one Redis.
 *
 * Tenant affinity: a tenant's sandbox, and so its start_process handles, live on one executor.
 * Routing a tenant's jobs to the executor holding its sandbox is the bus's part (tenant → one
 * of TOOLGATE_SHARDS queues by hash; each executor consumes the shards in
 * TOOLGATE_EXECUTOR_SHARDS). The limit, when one shard is consumed by several executors: each
 * may start a sandbox for the same tenant; files stay consistent only if they share the data
 * directory (one host, or a shared volume), and a process handle is known only to the executor
 * that started it (another answers "unknown handle"). So give each shard exactly one executor.
 */
import type { Bus, JobHandler } from '../shared/bus/bus';
import type { Config } from '../shared/config';
import type { Logger } from '../shared/log';
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';
import { createQuotaStore } from '../shared/quota/index';
import { createHttpPolicy } from '../shared/tools/http/policy';
import { ALL_TOOLS } from '../shared/tools/index';
import { LocalToolRunner } from '../shared/tools/local-runner';
import { ToolRegistry } from '../shared/tools/registry';
import { startAudit } from './audit';
import { createJobHandler } from './job-handler';
import { SECRET_ENV_TOOLS, secretAuditor, startSecretService } from './secrets/service';
import { SANDBOX_BACKENDS } from './sandbox/registry';
import { SingleIdentity } from './single-identity';
import { TenantPool } from './tenant-pool';
import { ProcessBudget } from './process-budget';
import { startWorkspaceQuota } from './workspaces';

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

/** How long the executor remembers a job it ran, so the audit can tell its outcome events apart. */
const RAN_HERE_RETAIN_MS = 5 * 60_000;

export async function startExecutor(deps: ExecutorDeps): Promise<Executor> {
  const { config, bus } = deps;
  const log = deps.log.child({ module: 'executor' });
  const registry = new ToolRegistry(ALL_TOOLS);
  // Secrets (a missing or wrong key is reported here and refuses only secret use): every use on the bus and in the audit.
  const auditSecret = secretAuditor(log);
  const secrets = await startSecretService({
    config,
    log,
    onUse: (event) => {
      bus.publish(event);
      auditSecret(event);
    },
  });
  const trusted = new LocalToolRunner({
    trusted: { limits: config.limits, http: createHttpPolicy(config.httpAllow), secrets: secrets.broker },
    onUnexpectedError: (err, tool) => log.error({ err, tool }, 'tool failed unexpectedly'),
  });
  // An unknown TOOLGATE_SANDBOX fails here, at start, naming every registered backend.
  const chosen = SANDBOX_BACKENDS.get(config.sandbox);
  const section = chosen.section(config);
  const backend = chosen.create(section, {
    role: 'executor',
    log,
    embedded: deps.embedded,
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
    await secrets.close();
    throw err;
  });
  // No wall between tenants on `none`: serve one identity only (single-identity.ts).
  const single = backend.isolating ? undefined : new SingleIdentity(config.executor.noneIdentity);
  if (single) {
    log.warn(
      { sandbox: backend.name, identity: single.tenant ?? '(the first that calls)' },
      'sandbox "none": no wall between tenants, so this executor serves one identity and refuses the others; use TOOLGATE_SANDBOX=bwrap or docker for several tenants',
    );
  }

  const ranHere = new Map<string, number>(); // job id → when it finished (Infinity while running)
  // Embedded (no Redis), this is the only executor: it audits every call, those that never
  // started included. On Redis every executor sees every event, so each audits the calls it ran
  // (once per call, however many executors); calls no executor ran (lost, never started) are
  // reported by the gateway's bus as job.failed and are the gateway's to audit.
  const audit = startAudit({ bus, log, includes: config.bus.redisUrl ? (id) => ranHere.has(id) : undefined });
  const sweeper = setInterval(() => {
    const cutoff = Date.now() - RAN_HERE_RETAIN_MS;
    for (const [id, finished] of ranHere) if (finished < cutoff) ranHere.delete(id);
  }, 60_000);
  sweeper.unref();

  const shutdown = new AbortController();
  const running = new Set<Promise<unknown>>();
  const handle = createJobHandler({
    registry,
    trusted,
    // A command's environment names the tenant's secrets (placeholders only), read per call: one added later is there at once.
    sandbox: (tenant, tool, args, signal, onProgress) =>
      SECRET_ENV_TOOLS.has(tool)
        ? secrets.commandArgs(tenant, tool, args).then((withNames) => pool.call(tenant, tool, withNames, signal, onProgress))
        : pool.call(tenant, tool, args, signal, onProgress),
    shutdown: shutdown.signal,
  });
  const handler: JobHandler = (job, control, onProgress) => {
    ranHere.set(job.id, Infinity);
    const run = (async () => {
      if (single && typeof job.tenant === 'string' && job.tenant.length > 0) {
        const first = single.tenant === undefined;
        single.admit(job.tenant);
        if (first) log.warn({ identity: job.tenant }, 'sandbox "none": serving this identity only from now on');
      }
      return handle(job, control, onProgress);
    })().catch((err: unknown) => {
      if (err instanceof ProtocolError) throw err;
      log.error({ err, tool: job.tool, tenant: job.tenant }, 'job failed unexpectedly');
      throw new ProtocolError(ErrorCode.InternalError, 'Internal error');
    });
    const tracked = run.finally(() => {
      ranHere.set(job.id, Date.now());
      running.delete(tracked);
    });
    running.add(tracked);
    tracked.catch(() => undefined);
    return run;
  };
  const consumer = await bus.consume(handler, { concurrency: config.executor.concurrency }).catch(async (err: unknown) => {
    clearInterval(sweeper);
    audit.stop();
    await pool.close();
    await quotas.close();
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
        // Running jobs may finish within the grace time; then they are aborted (Unavailable).
        let grace: NodeJS.Timeout | undefined;
        await Promise.race([Promise.allSettled([...running]), new Promise((r) => (grace = setTimeout(r, config.shutdownGraceMs)))]);
        clearTimeout(grace);
        shutdown.abort(new ProtocolError(ErrorCode.Unavailable, 'Unavailable: the executor is shutting down'));
        await Promise.allSettled([...running]);
        await pool.close();
        // After the sandboxes (their processes' leases are returned as they end): releases the rest.
        await quotas.close();
        await secrets.close();
        await trusted.close();
        clearInterval(sweeper);
        // The last jobs' outcome events are delivered asynchronously: let them reach the audit.
        await new Promise((r) => setTimeout(r, 50));
        audit.stop();
        log.info('executor stopped');
      })();
      return closing;
    },
  };
}
