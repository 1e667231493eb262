/**
 * How one environment value is read: each parser takes the variable's name, returns its default
 * when it is unset or blank, and throws a ConfigError that names the variable and the value when
 * it is malformed. Used by config.ts and its section parsers.
 */
import { ConfigError } from './config-error';

export const configError = (message: string): never => {
  throw new ConfigError(message);
};

export type Env = Readonly<Record<string, string | undefined>>;

export function positiveInt(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim()) || Number(raw) <= 0 || !Number.isSafeInteger(Number(raw))) {
    throw new ConfigError(`${name} must be a positive whole number, got "${raw}"`);
  }
  return Number(raw);
}

export function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!(allowed as readonly string[]).includes(raw.trim())) {
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw.trim() as T;
}

/** A comma-separated list, items trimmed, empty ones dropped. */
export function list(env: Env, name: string): readonly string[] {
  return Object.freeze(
    (env[name] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
}

export function wholeNumber(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(Number(raw))) throw new ConfigError(`${name} must be a whole number (0 or more), got "${raw}"`);
  return Number(raw);
}

/** Bytes, optionally with a binary suffix: 1073741824, 1G, 512M, 1GiB. */
export function byteSize(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const m = /^(\d+)\s*(?:([kmgt])(?:i?b)?)?$/i.exec(raw.trim());
  const value = m ? Number(m[1]) * 1024 ** (m[2] ? 'kmgt'.indexOf(m[2].toLowerCase()) + 1 : 0) : NaN;
  if (!Number.isSafeInteger(value)) throw new ConfigError(`${name} must be a size in bytes (e.g. 1073741824, 512M, 1G), got "${raw}"`);
  return value;
}

export function positiveNumber(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!/^\d+(\.\d+)?$/.test(raw.trim()) || !(value > 0)) throw new ConfigError(`${name} must be a positive number, got "${raw}"`);
  return value;
}

export function port(env: Env, name: string, fallback: number): number {
  const value = positiveInt(env, name, fallback);
  if (value > 65535) throw new ConfigError(`${name} must be a port number (1-65535), got "${env[name]}"`);
  return value;
}
