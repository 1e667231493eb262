/**
 * The one place the environment is read. `loadConfig` parses every TOOLGATE_* variable once,
 * at the composition root, into a frozen Config that is passed down; no other module reads
 * process.env. A bad value stops start-up with a sentence naming the variable.
 */
import * as path from 'node:path';
import { DEFAULT_LIMITS, LIMIT_ENV, ToolLimits } from './limits';

export const SANDBOX_BACKENDS = ['none', 'bwrap', 'docker'] as const;
export type SandboxBackendName = (typeof SANDBOX_BACKENDS)[number];
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export interface ProtocolLimits {
  /** TOOLGATE_MAX_MESSAGE_BYTES: largest JSON-RPC message (stdio line or HTTP body). */
  maxMessageBytes: number;
  /** TOOLGATE_MAX_JSON_DEPTH: deepest nesting accepted in a message. */
  maxDepth: number;
  /** TOOLGATE_MAX_BATCH: most elements in one batch. */
  maxBatch: number;
}

export interface Config {
  /** TOOLGATE_DATA_DIR (default ./.toolgate): secret file, tenant workspaces. */
  dataDir: string;
  /** TOOLGATE_JWT_SECRET: the token signing secret; otherwise the data directory's secret file. */
  jwtSecret: string | undefined;
  /** TOOLGATE_LOG_LEVEL (default info). */
  logLevel: (typeof LOG_LEVELS)[number];
  /** TOOLGATE_SANDBOX (default none): which sandbox backend runs the file and command tools. */
  sandbox: SandboxBackendName;
  /** TOOLGATE_HTTP_ALLOW: CIDRs and host:port entries http_request may reach despite the SSRF guard. */
  httpAllow: readonly string[];
  /** TOOLGATE_SHUTDOWN_GRACE_MS (default 10000): how long running calls may finish after the client leaves. */
  shutdownGraceMs: number;
  protocol: ProtocolLimits;
  limits: ToolLimits;
}

export const SECRET_FILE_NAME = 'jwt-secret';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

type Env = Readonly<Record<string, string | undefined>>;

function positiveInt(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim()) || Number(raw) <= 0 || !Number.isSafeInteger(Number(raw))) {
    throw new ConfigError(`${name} must be a positive whole number, got "${raw}"`);
  }
  return Number(raw);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!(allowed as readonly string[]).includes(raw.trim())) {
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw.trim() as T;
}

export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Readonly<Config> {
  const limits = {} as ToolLimits;
  for (const key of Object.keys(DEFAULT_LIMITS) as Array<keyof ToolLimits>) {
    limits[key] = positiveInt(env, LIMIT_ENV[key], DEFAULT_LIMITS[key]);
  }
  const secret = env.TOOLGATE_JWT_SECRET;
  return Object.freeze({
    dataDir: path.resolve(cwd, env.TOOLGATE_DATA_DIR?.trim() || '.toolgate'),
    jwtSecret: secret !== undefined && secret.length > 0 ? secret : undefined,
    logLevel: oneOf(env, 'TOOLGATE_LOG_LEVEL', LOG_LEVELS, 'info'),
    sandbox: oneOf(env, 'TOOLGATE_SANDBOX', SANDBOX_BACKENDS, 'none'),
    httpAllow: Object.freeze((env.TOOLGATE_HTTP_ALLOW ?? '').split(',').map((s) => s.trim()).filter(Boolean)),
    shutdownGraceMs: positiveInt(env, 'TOOLGATE_SHUTDOWN_GRACE_MS', 10_000),
    protocol: Object.freeze({
      maxMessageBytes: positiveInt(env, 'TOOLGATE_MAX_MESSAGE_BYTES', 16 * 1024 * 1024),
      maxDepth: positiveInt(env, 'TOOLGATE_MAX_JSON_DEPTH', 64),
      maxBatch: positiveInt(env, 'TOOLGATE_MAX_BATCH', 1000),
    }),
    limits: Object.freeze(limits),
  });
}
