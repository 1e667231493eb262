/**
 * `toolgate shim`'s settings, checked before anything connects: the gateway URL, the CA file,
 * the deadlines and the credentials from the environment. A bad one stops start-up with a
 * sentence that names it and never repeats a secret.
 */
import { promises as fs } from 'node:fs';
import type { ShimConfig } from '../shared/config';
import { TOOLGATE_VERSION } from '../shared/version';
import type { GatewayClientOptions } from './gateway-client';

/** A little above the gateway's own call deadline (660 s), so its Timeout error arrives first. */
export const DEFAULT_TIMEOUT_MS = 665_000;
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;

export interface ShimFlags {
  url?: string;
  ca?: string;
  timeoutMs?: string;
  connectTimeoutMs?: string;
}

export class ShimSettingsError extends Error {
  override readonly name = 'ShimSettingsError';
}

/** Visible ASCII only: what may go in an HTTP header without being mangled or injected. */
const HEADER_SAFE = /^[\x21-\x7e]+$/;

export async function resolveShimSettings(flags: ShimFlags, env: Readonly<ShimConfig>, maxReplyBytes: number): Promise<GatewayClientOptions> {
  if (flags.url === undefined) throw new ShimSettingsError('--url is required: the gateway address, e.g. --url https://127.0.0.1:8443/');
  let url: URL;
  try {
    url = new URL(flags.url);
  } catch {
    throw new ShimSettingsError(`--url is not a URL: "${flags.url}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ShimSettingsError(`--url must be http:// or https://, not ${url.protocol}`);
  if (url.username !== '' || url.password !== '') {
    throw new ShimSettingsError('--url must not carry credentials; the shim sends TOOLGATE_TOKEN (and TOOLGATE_API_KEY) as headers');
  }
  if (url.hash !== '') throw new ShimSettingsError('--url must not have a #fragment');

  const token = env.token;
  if (token === undefined) throw new ShimSettingsError('TOOLGATE_TOKEN is not set: the gateway needs a bearer token (make one with generate-token)');
  if (!HEADER_SAFE.test(token)) throw new ShimSettingsError('TOOLGATE_TOKEN must be printable ASCII without spaces');
  if (env.apiKey !== undefined && !HEADER_SAFE.test(env.apiKey)) throw new ShimSettingsError('TOOLGATE_API_KEY must be printable ASCII without spaces');

  let ca: string | undefined;
  if (flags.ca !== undefined) {
    if (url.protocol !== 'https:') throw new ShimSettingsError('--ca only applies to an https:// --url');
    try {
      ca = await fs.readFile(flags.ca, 'utf8');
    } catch (err) {
      throw new ShimSettingsError(`--ca ${flags.ca}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
    if (!ca.includes('-----BEGIN CERTIFICATE-----')) throw new ShimSettingsError(`--ca ${flags.ca}: not a PEM certificate file`);
  }

  return {
    url,
    token,
    ...(env.apiKey === undefined ? {} : { apiKey: env.apiKey }),
    ...(ca === undefined ? {} : { ca }),
    timeoutMs: milliseconds('--timeout-ms', flags.timeoutMs, DEFAULT_TIMEOUT_MS),
    connectTimeoutMs: milliseconds('--connect-timeout-ms', flags.connectTimeoutMs, DEFAULT_CONNECT_TIMEOUT_MS),
    maxReplyBytes,
    userAgent: `toolgate-shim/${TOOLGATE_VERSION}`,
  };
}

function milliseconds(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  // setTimeout holds at most 2^31-1 ms; a larger value would fire at once.
  if (!/^\d+$/.test(raw) || value <= 0 || value > 2_147_483_647)
    throw new ShimSettingsError(`${name} must be a whole number of milliseconds from 1 to 2147483647, got "${raw}"`);
  return value;
}

/** True for a URL whose traffic never leaves this machine, where plain http exposes nothing. */
export function isLoopback(url: URL): boolean {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
