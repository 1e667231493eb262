/**
 * The one place the environment is read. `loadConfig` parses every TOOLGATE_* variable once,
 * at the composition root, into a frozen Config that is passed down; no other module reads
 * process.env. A bad value stops start-up with a sentence naming the variable.
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { DEFAULT_LIMITS, LIMIT_ENV, ToolLimits } from './limits';
import { RedisConfig, redisConfig } from './redis-config';
import { ConfigError } from './config-error';
import { byteSize, configError, Env, list, oneOf, port, positiveInt, positiveNumber, wholeNumber } from './config-values';
import { loadOAuthConfig, OAuthConfig } from './oauth-config';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;

export interface ProtocolLimits {
  /** TOOLGATE_MAX_MESSAGE_BYTES: largest JSON-RPC message (stdio line or HTTP body). */
  maxMessageBytes: number;
  /** TOOLGATE_MAX_JSON_DEPTH: deepest nesting accepted in a message. */
  maxDepth: number;
  /** TOOLGATE_MAX_BATCH: most elements in one batch. */
  maxBatch: number;
  /** TOOLGATE_TOOLS_LIST_TTL_MS (default 300000): the `ttlMs` a 2026-07-28 client may cache tools/list for. */
  toolsListTtlMs: number;
  /** TOOLGATE_PROGRESS_INTERVAL_MS (default 2000): a call that asked for progress gets a notification at least this often. */
  progressIntervalMs: number;
}

export interface Config {
  /** TOOLGATE_DATA_DIR (default ./.toolgate): secret file, tenant workspaces. */
  dataDir: string;
  /** TOOLGATE_JWT_SECRET: the token signing secret; otherwise the data directory's secret file. */
  jwtSecret: string | undefined;
  /** TOOLGATE_LOG_LEVEL (default info). */
  logLevel: (typeof LOG_LEVELS)[number];
  /** TOOLGATE_LOG_FORMAT (default auto): readable lines when stderr is a terminal, JSON lines otherwise. */
  logFormat: (typeof LOG_FORMATS)[number];
  /**
   * TOOLGATE_SANDBOX (default none): the id of the sandbox backend that runs the file and command
   * tools. Checked where a backend is chosen (executor/sandbox/registry.ts lists them), not here.
   */
  sandbox: string;
  /** Whether TOOLGATE_SANDBOX was given: `serve` then uses it as is, else it picks the strongest backend available. */
  sandboxExplicit: boolean;
  /** TOOLGATE_HTTP_ALLOW: CIDRs and host:port entries http_request may reach despite the SSRF guard. */
  httpAllow: readonly string[];
  /** TOOLGATE_SHUTDOWN_GRACE_MS (default 10000): how long running calls may finish after the client leaves. */
  shutdownGraceMs: number;
  protocol: ProtocolLimits;
  limits: ToolLimits;
  gateway: GatewayConfig;
  bus: BusConfig;
  /** The Redis every process shares (redis-config.ts); unset → the in-process bus, the executor embedded in `serve`. */
  redis: Readonly<RedisConfig> | undefined;
  tasks: TaskConfig;
  executor: ExecutorConfig;
  shim: ShimConfig;
  docker: DockerSandboxConfig;
  workspaceQuota: WorkspaceQuotaConfig;
  egress: EgressConfig;
  /** The OAuth endpoint (shared/oauth-config.ts); undefined without TOOLGATE_OAUTH_ISSUERS. */
  oauth: Readonly<OAuthConfig> | undefined;
  secrets: SecretsConfig;
}

/**
 * The secret store's keys, kept as given (executor/secrets/key.ts parses them where secrets are
 * used: a bad key refuses secrets with a sentence, and everything else keeps working).
 */
export interface SecretsConfig {
  /** TOOLGATE_SECRETS_KEY: 32 random bytes, hex or base64; without it secrets are refused. */
  key: string | undefined;
  /** TOOLGATE_SECRETS_KEY_OLD: the key `toolgate secret rotate-key` re-encrypts from. */
  oldKey: string | undefined;
}

/**
 * Governed egress: what sandboxed commands may reach through the executor's proxy
 * (executor/egress/). Rule lists are kept as written here and parsed by executor/egress/rules.ts
 * at start-up, whose errors name the variable. A tenant's own policy (`toolgate egress set`)
 * replaces allow and deny together.
 */
export interface EgressConfig {
  /** TOOLGATE_EGRESS_ALLOW (default empty: no egress): rules any tenant without its own policy may reach. */
  allow: readonly string[];
  /** TOOLGATE_EGRESS_DENY (default empty): rules refused even when allowed; deny wins. */
  deny: readonly string[];
  /** TOOLGATE_EGRESS_RESOLVE (default empty): `name=ip` pins; a pinned name reaches its address even if private, when a rule allows the name. */
  resolve: readonly string[];
  /** TOOLGATE_EGRESS_CA_FILE (optional): extra certificate authorities (PEM) trusted for upstream TLS. */
  caFile: string | undefined;
  /** TOOLGATE_EGRESS_MAX_CONNECTIONS (default 64): upstream connections one tenant may have open at once. */
  maxConnectionsPerTenant: number;
  /** TOOLGATE_EGRESS_BYTES_PER_DAY (default 1 GiB; suffixes K, M, G, T; 0: no limit): bytes one tenant may move per UTC day. */
  bytesPerDayPerTenant: number;
}

/**
 * The per-tenant workspace disk quota, enforced by the kernel on the bwrap and docker backends
 * (an ext4 image per workspace, loop-mounted by the executor: executor/workspace-quota.ts).
 * Unenforced on `none`.
 */
export interface WorkspaceQuotaConfig {
  /** TOOLGATE_WORKSPACE_QUOTA_BYTES (default 1 GiB; suffixes K, M, G, T; 0: no quota): size of each workspace. */
  bytes: number;
  /** TOOLGATE_WORKSPACE_QUOTA_INODES (default 65536; 0: the filesystem's default for its size): files per workspace. */
  inodes: number;
}

/** The docker sandbox backend (TOOLGATE_SANDBOX=docker). Every hardening point is on by default. */
export interface DockerSandboxConfig {
  /** TOOLGATE_SANDBOX_IMAGE (default toolgate-sandbox:local): the sandbox image, built locally. */
  image: string;
  /** TOOLGATE_SANDBOX_MEMORY_MB (default 256): memory (and memory+swap) limit per sandbox. */
  memoryMb: number;
  /** TOOLGATE_SANDBOX_PIDS (default 128): process limit per sandbox. */
  pidsLimit: number;
  /** TOOLGATE_SANDBOX_CPUS (default 1): CPU limit per sandbox, in cores (decimals allowed). */
  cpus: number;
  /** TOOLGATE_SANDBOX_TMP_MB (default 64): size of the sandbox's tmpfs /tmp. */
  tmpMb: number;
  /** TOOLGATE_SANDBOX_UID (default 65534): the unprivileged uid:gid sandboxes run as. */
  uid: number;
  /** TOOLGATE_SANDBOX_RUNTIME (optional): an OCI runtime such as runsc (gVisor), passed through. */
  runtime: string | undefined;
  /**
   * TOOLGATE_HOST_DATA_DIR (default: TOOLGATE_DATA_DIR): the data directory as the Docker host
   * sees it, for bind mounts when the executor itself runs in a container.
   */
  hostDataDir: string;
  /**
   * TOOLGATE_SANDBOX_POOL_SIZE (default 2; 0: none): docker sandboxes an executor keeps started
   * ahead of need, bound to a new tenant's workspace on its first call (docs/deployment.md).
   */
  poolSize: number;
}

export interface GatewayConfig {
  /** TOOLGATE_HOST (default 127.0.0.1) and TOOLGATE_PORT (default 3000): where `serve` listens. */
  host: string;
  port: number;
  /** TOOLGATE_MAX_CONCURRENT_CALLS (default 16): tools/call running at once per identity. */
  maxConcurrentCalls: number;
  /** TOOLGATE_CALLS_PER_MINUTE (default 600): tools/call started per identity per minute. */
  callsPerMinute: number;
  /** TOOLGATE_ALLOWED_ORIGINS (default none): browser origins allowed to call (`*`: any); a request with another Origin → 403. */
  allowedOrigins: readonly string[];
  /** TOOLGATE_ALLOWED_HOSTS (default none): Host names a loopback-bound gateway accepts besides loopback ones. */
  allowedHosts: readonly string[];
  /**
   * TOOLGATE_MAX_BODY_BYTES_IN_FLIGHT_PER_IDENTITY (default 4 × TOOLGATE_MAX_MESSAGE_BYTES): request
   * body bytes one identity may have in flight at once (read, parsed or being answered); 429 past it.
   */
  maxBodyBytesInFlight: number;
  /** TOOLGATE_MAX_JSON_ELEMENTS (default 100000): arrays, objects and their members/elements in one body; -32600 past it, before parsing. */
  maxJsonElements: number;
  /**
   * TOOLGATE_TENANT_CONCURRENCY (default a quarter of TOOLGATE_EXECUTOR_CONCURRENCY, at least 1):
   * jobs one identity may have on the bus at once (queued or running); its further calls wait
   * their turn at the gateway, so no identity can fill an executor's slots.
   */
  tenantConcurrency: number;
}

/** MCP tasks: a long call's handle instead of its result, for clients that declared tasks. */
export interface TaskConfig {
  /** TOOLGATE_TASK_AFTER_MS (default 4000): a 2026-07-28 call still running after this is answered with a task. */
  afterMs: number;
  /** TOOLGATE_TASK_TTL_MS (default 3600000): how long a task and its result are kept (also the most a 2025-11-25 client may ask). */
  ttlMs: number;
  /** TOOLGATE_TASK_POLL_MS (default 1000): the poll interval suggested to clients. */
  pollIntervalMs: number;
  /** TOOLGATE_MAX_TASKS_PER_IDENTITY (default 16): working tasks per identity at once. */
  maxPerIdentity: number;
  /** TOOLGATE_MAX_TASK_RESULT_BYTES (default 4194304): the largest result a task keeps; a larger one ends it failed (-32007). */
  maxResultBytes: number;
}

export interface BusConfig {
  /** TOOLGATE_CALL_TIMEOUT_MS (default 660000): a call's whole deadline, queue time included. */
  callTimeoutMs: number;
  /** TOOLGATE_QUEUE_TIMEOUT_MS (default 30000): an executor must start a call within this, else Unavailable. */
  queueTimeoutMs: number;
  /** TOOLGATE_SHARDS (default 1): queues tenants are spread over (tenant → shard by hash) for executor affinity. */
  shards: number;
  /**
   * TOOLGATE_JOB_LOCK_MS (default 5000, at least 2000): a running call's lock in Redis, renewed
   * every second. A call survives a Redis outage (a failover) shorter than about this less a
   * second; an executor that dies is noticed (its calls answered -32010) about this long after.
   */
  jobLockMs: number;
}

export interface ExecutorConfig {
  /**
   * TOOLGATE_EXECUTOR_ID (default: hostname): marks what this executor leaves on the host (its
   * sandboxes, its workspace mounts) with the process that made it, so a restart cleans up what
   * a gone run left and never what a live one holds (executor/process-owner.ts).
   */
  id: string;
  /** TOOLGATE_EXECUTOR_CONCURRENCY (default 16): jobs one executor runs at once. */
  concurrency: number;
  /** TOOLGATE_EXECUTOR_SHARDS (default: all): comma-separated shard numbers this executor is a candidate for. */
  ownedShards: readonly number[] | 'all';
  /**
   * TOOLGATE_SHARD_LEASE_MS (default 5000; 0: no lease): each shard is served by the one
   * candidate holding its lease in Redis, and a standby takes over a dead holder's shards
   * within this (shared/bus/shard-leases.ts). 0: every candidate serves its shards at once.
   */
  shardLeaseMs: number;
  /** TOOLGATE_SANDBOX_IDLE_MS (default 300000): an idle tenant sandbox is stopped after this. */
  sandboxIdleMs: number;
  /** TOOLGATE_MAX_SANDBOXES (default 64): live sandboxes per executor; the least recently used is stopped first. */
  maxSandboxes: number;
  /**
   * TOOLGATE_MAX_PROCESSES_PER_IDENTITY (default TOOLGATE_MAX_PROCESSES + TOOLGATE_TENANT_CONCURRENCY):
   * live processes one identity may have on all executors together — run_command calls running
   * and start_process processes not yet ended. Cluster-wide on Redis.
   */
  maxProcessesPerIdentity: number;
  /**
   * TOOLGATE_NONE_IDENTITY (default: the first identity that calls): on the `none` backend, which
   * has no wall between tenants, the one identity this executor runs tools for.
   */
  noneIdentity: string | undefined;
}

export interface ShimConfig {
  /** TOOLGATE_TOKEN: the bearer token `toolgate shim` sends. */
  token: string | undefined;
  /** TOOLGATE_API_KEY: sent as X-API-Key by `toolgate shim` when set (for Caddy). */
  apiKey: string | undefined;
}

export const SECRET_FILE_NAME = 'jwt-secret';

export { ConfigError };

export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Readonly<Config> {
  const limits = {} as ToolLimits;
  for (const key of Object.keys(DEFAULT_LIMITS) as Array<keyof ToolLimits>) {
    limits[key] = positiveInt(env, LIMIT_ENV[key], DEFAULT_LIMITS[key]);
  }
  const secret = env.TOOLGATE_JWT_SECRET;
  const maxMessageBytes = positiveInt(env, 'TOOLGATE_MAX_MESSAGE_BYTES', DEFAULT_MAX_MESSAGE_BYTES);
  const executorConcurrency = positiveInt(env, 'TOOLGATE_EXECUTOR_CONCURRENCY', 16);
  const tenantConcurrency = positiveInt(env, 'TOOLGATE_TENANT_CONCURRENCY', Math.max(1, Math.floor(executorConcurrency / 4)));
  return Object.freeze({
    dataDir: path.resolve(cwd, env.TOOLGATE_DATA_DIR?.trim() || '.toolgate'),
    jwtSecret: secret !== undefined && secret.length > 0 ? secret : undefined,
    logLevel: oneOf(env, 'TOOLGATE_LOG_LEVEL', LOG_LEVELS, 'info'),
    logFormat: oneOf(env, 'TOOLGATE_LOG_FORMAT', LOG_FORMATS, 'auto'),
    sandbox: env.TOOLGATE_SANDBOX?.trim() || 'none',
    sandboxExplicit: (env.TOOLGATE_SANDBOX ?? '').trim() !== '',
    httpAllow: list(env, 'TOOLGATE_HTTP_ALLOW'),
    shutdownGraceMs: positiveInt(env, 'TOOLGATE_SHUTDOWN_GRACE_MS', 10_000),
    protocol: Object.freeze({
      maxMessageBytes,
      maxDepth: positiveInt(env, 'TOOLGATE_MAX_JSON_DEPTH', 64),
      maxBatch: positiveInt(env, 'TOOLGATE_MAX_BATCH', 1000),
      toolsListTtlMs: positiveInt(env, 'TOOLGATE_TOOLS_LIST_TTL_MS', 300_000),
      progressIntervalMs: positiveInt(env, 'TOOLGATE_PROGRESS_INTERVAL_MS', 2_000),
    }),
    limits: Object.freeze(limits),
    gateway: Object.freeze({
      host: env.TOOLGATE_HOST?.trim() || '127.0.0.1',
      port: port(env, 'TOOLGATE_PORT', 3000),
      maxConcurrentCalls: positiveInt(env, 'TOOLGATE_MAX_CONCURRENT_CALLS', 16),
      callsPerMinute: positiveInt(env, 'TOOLGATE_CALLS_PER_MINUTE', 600),
      allowedOrigins: list(env, 'TOOLGATE_ALLOWED_ORIGINS'),
      allowedHosts: list(env, 'TOOLGATE_ALLOWED_HOSTS'),
      maxBodyBytesInFlight: bodyBytesInFlight(env, maxMessageBytes),
      maxJsonElements: positiveInt(env, 'TOOLGATE_MAX_JSON_ELEMENTS', 100_000),
      tenantConcurrency,
    }),
    tasks: Object.freeze({
      afterMs: positiveInt(env, 'TOOLGATE_TASK_AFTER_MS', 4_000),
      ttlMs: positiveInt(env, 'TOOLGATE_TASK_TTL_MS', 3_600_000),
      pollIntervalMs: positiveInt(env, 'TOOLGATE_TASK_POLL_MS', 1_000),
      maxPerIdentity: positiveInt(env, 'TOOLGATE_MAX_TASKS_PER_IDENTITY', 16),
      maxResultBytes: positiveInt(env, 'TOOLGATE_MAX_TASK_RESULT_BYTES', 4 * 1024 * 1024),
    }),
    redis: redisConfig(env, configError),
    bus: Object.freeze({
      callTimeoutMs: positiveInt(env, 'TOOLGATE_CALL_TIMEOUT_MS', 660_000),
      queueTimeoutMs: positiveInt(env, 'TOOLGATE_QUEUE_TIMEOUT_MS', 30_000),
      shards: positiveInt(env, 'TOOLGATE_SHARDS', 1),
      jobLockMs: jobLockMs(env),
    }),
    executor: Object.freeze({
      id: env.TOOLGATE_EXECUTOR_ID?.trim() || os.hostname(),
      concurrency: executorConcurrency,
      ownedShards: shardList(env),
      shardLeaseMs: shardLeaseMs(env),
      sandboxIdleMs: positiveInt(env, 'TOOLGATE_SANDBOX_IDLE_MS', 300_000),
      maxSandboxes: positiveInt(env, 'TOOLGATE_MAX_SANDBOXES', 64),
      // One sandbox's full process table plus a run_command in each of the identity's bus slots:
      // on one executor it never refuses before the per-sandbox limit; across several it caps the sum.
      maxProcessesPerIdentity: positiveInt(env, 'TOOLGATE_MAX_PROCESSES_PER_IDENTITY', limits.maxProcesses + tenantConcurrency),
      noneIdentity: env.TOOLGATE_NONE_IDENTITY?.trim() || undefined,
    }),
    docker: Object.freeze({
      image: env.TOOLGATE_SANDBOX_IMAGE?.trim() || 'toolgate-sandbox:local',
      memoryMb: positiveInt(env, 'TOOLGATE_SANDBOX_MEMORY_MB', 256),
      pidsLimit: positiveInt(env, 'TOOLGATE_SANDBOX_PIDS', 128),
      cpus: positiveNumber(env, 'TOOLGATE_SANDBOX_CPUS', 1),
      tmpMb: positiveInt(env, 'TOOLGATE_SANDBOX_TMP_MB', 64),
      uid: positiveInt(env, 'TOOLGATE_SANDBOX_UID', 65534),
      runtime: env.TOOLGATE_SANDBOX_RUNTIME?.trim() || undefined,
      hostDataDir: path.resolve(cwd, env.TOOLGATE_HOST_DATA_DIR?.trim() || env.TOOLGATE_DATA_DIR?.trim() || '.toolgate'),
      poolSize: wholeNumber(env, 'TOOLGATE_SANDBOX_POOL_SIZE', 2),
    }),
    workspaceQuota: workspaceQuota(env),
    egress: Object.freeze({
      allow: list(env, 'TOOLGATE_EGRESS_ALLOW'),
      deny: list(env, 'TOOLGATE_EGRESS_DENY'),
      resolve: list(env, 'TOOLGATE_EGRESS_RESOLVE'),
      caFile: env.TOOLGATE_EGRESS_CA_FILE?.trim() ? path.resolve(cwd, env.TOOLGATE_EGRESS_CA_FILE.trim()) : undefined,
      maxConnectionsPerTenant: positiveInt(env, 'TOOLGATE_EGRESS_MAX_CONNECTIONS', 64),
      bytesPerDayPerTenant: byteSize(env, 'TOOLGATE_EGRESS_BYTES_PER_DAY', 1024 ** 3),
    }),
    secrets: Object.freeze({ key: env.TOOLGATE_SECRETS_KEY?.trim() || undefined, oldKey: env.TOOLGATE_SECRETS_KEY_OLD?.trim() || undefined }),
    shim: Object.freeze({
      token: env.TOOLGATE_TOKEN?.trim() || undefined,
      apiKey: env.TOOLGATE_API_KEY?.trim() || undefined,
    }),
    oauth: loadOAuthConfig(env, { host: env.TOOLGATE_HOST?.trim() || '127.0.0.1', port: port(env, 'TOOLGATE_PORT', 3000) }),
  });
}

/**
 * The largest JSON-RPC message by default. Sized for real tool calls: write_file's content limit
 * (TOOLGATE_MAX_WRITE_BYTES) plus room for JSON escaping and the envelope; see README "Request cost".
 */
const DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

function bodyBytesInFlight(env: Env, maxMessageBytes: number): number {
  const value = positiveInt(env, 'TOOLGATE_MAX_BODY_BYTES_IN_FLIGHT_PER_IDENTITY', 4 * maxMessageBytes);
  if (value < maxMessageBytes) {
    throw new ConfigError(
      `TOOLGATE_MAX_BODY_BYTES_IN_FLIGHT_PER_IDENTITY (${value}) must be at least TOOLGATE_MAX_MESSAGE_BYTES (${maxMessageBytes}), or no body of the largest size could ever be read`,
    );
  }
  return value;
}

/** Smallest quota ext4 can hold with room to spare (executor/workspace-quota.ts MIN_QUOTA_BYTES). */
const MIN_WORKSPACE_QUOTA_BYTES = 8 * 1024 * 1024;
/** mkfs.ext4 needs at least 1 KiB of space per inode. */
const MIN_BYTES_PER_INODE = 1024;

function workspaceQuota(env: Env): Readonly<WorkspaceQuotaConfig> {
  const bytes = byteSize(env, 'TOOLGATE_WORKSPACE_QUOTA_BYTES', 1024 ** 3);
  if (bytes > 0 && bytes < MIN_WORKSPACE_QUOTA_BYTES) {
    throw new ConfigError(`TOOLGATE_WORKSPACE_QUOTA_BYTES must be 0 (no quota) or at least 8M, got "${env.TOOLGATE_WORKSPACE_QUOTA_BYTES}"`);
  }
  // The default fits any quota: 65536 files, or one per KiB of a smaller quota (mkfs's floor).
  const mostInodes = Math.floor(bytes / MIN_BYTES_PER_INODE);
  const inodes = wholeNumber(env, 'TOOLGATE_WORKSPACE_QUOTA_INODES', bytes > 0 ? Math.min(65536, mostInodes) : 65536);
  if (bytes > 0 && inodes > mostInodes) {
    throw new ConfigError(`TOOLGATE_WORKSPACE_QUOTA_INODES must be at most one per KiB of TOOLGATE_WORKSPACE_QUOTA_BYTES (${mostInodes}), got "${inodes}"`);
  }
  return Object.freeze({ bytes, inodes });
}

function shardList(env: Env): readonly number[] | 'all' {
  const raw = env.TOOLGATE_EXECUTOR_SHARDS?.trim();
  if (!raw || raw === 'all') return 'all';
  const shards = raw.split(',').map((s) => s.trim());
  if (!shards.every((s) => /^\d+$/.test(s))) throw new ConfigError(`TOOLGATE_EXECUTOR_SHARDS must be "all" or comma-separated shard numbers, got "${raw}"`);
  return Object.freeze(shards.map(Number));
}

function jobLockMs(env: Env): number {
  const ms = positiveInt(env, 'TOOLGATE_JOB_LOCK_MS', 5000);
  if (ms < 2000) throw new ConfigError(`TOOLGATE_JOB_LOCK_MS must be at least 2000 (the lock is renewed every second), got ${ms}`);
  return ms;
}

function shardLeaseMs(env: Env): number {
  const ms = wholeNumber(env, 'TOOLGATE_SHARD_LEASE_MS', 5000);
  if (ms !== 0 && ms < 300)
    throw new ConfigError(`TOOLGATE_SHARD_LEASE_MS must be 0 (no lease) or at least 300 (a lease renewed every third of it), got ${ms}`);
  return ms;
}
