/**
 * DNS-rebinding defence (MCP Streamable HTTP, "Security": servers MUST validate `Origin`). A
 * browser page sends `Origin`; every other client (SDKs, curl, agents) sends none and passes.
 * A present Origin must be on the allow-list (exact `scheme://host[:port]`, or `*`), else 403.
 * And a gateway bound to loopback answers only to loopback names in `Host`: a page on
 * attacker.example whose name was re-pointed at 127.0.0.1 still sends `Host: attacker.example`.
 * Such a gateway also accepts loopback origins (`http://localhost:PORT`, `http://127.0.0.1:PORT`,
 * `http://[::1]:PORT`, any port): a page served from this machine's loopback is run by a local
 * process that could reach the gateway directly anyway, and the MCP conformance scenario
 * `dns-rebinding-protection` expects them served. A gateway bound elsewhere accepts only its list.
 * Both refusals carry a JSON-RPC error body without an id.
 */
import type { Middleware } from 'koa';
import { ErrorCode } from '../shared/protocol/errors';
import { HttpProblem } from './errors';

export interface OriginPolicy {
  /** TOOLGATE_ALLOWED_ORIGINS: origins browsers may call from (`*`: any). Empty: no browser origin. */
  allowedOrigins: readonly string[];
  /** TOOLGATE_ALLOWED_HOSTS: extra `Host` names a loopback-bound gateway accepts (e.g. a proxy's). */
  allowedHosts: readonly string[];
  /** The address the gateway listens on: the Host check applies when it is a loopback one. */
  listenHost: string;
}

const forbidden = (message: string) => new HttpProblem(403, ErrorCode.OriginNotAllowed, `Forbidden: ${message}`);

export function isLoopbackAddress(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h) || h === '::ffff:127.0.0.1';
}

/** The name in a Host header, without its port (`[::1]:3000` → `::1`). */
export function hostName(header: string): string {
  const h = header.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']') === -1 ? undefined : h.indexOf(']'));
  const colon = h.lastIndexOf(':');
  return colon === -1 ? h : h.slice(0, colon);
}

/** An http(s) origin whose host is a loopback name or address (`http://[::1]:3000`). */
export function isLoopbackOrigin(origin: string): boolean {
  try {
    const url = new URL(origin);
    return (url.protocol === 'http:' || url.protocol === 'https:') && isLoopbackAddress(url.hostname);
  } catch {
    return false;
  }
}

/** `https://App.example:443/` → `https://app.example` (scheme and host lower-cased, default port and path dropped). */
export function normalizeOrigin(origin: string): string | undefined {
  try {
    const url = new URL(origin);
    return url.origin === 'null' ? undefined : url.origin;
  } catch {
    return undefined;
  }
}

export function originGuard(policy: OriginPolicy): Middleware {
  const anyOrigin = policy.allowedOrigins.includes('*');
  const origins = new Set(policy.allowedOrigins.map(normalizeOrigin).filter((o): o is string => o !== undefined));
  const hosts = new Set(policy.allowedHosts.map((h) => hostName(h)));
  const checkHost = isLoopbackAddress(policy.listenHost);
  return async (ctx, next) => {
    const origin = ctx.get('Origin');
    if (origin !== '' && !anyOrigin) {
      const normalized = normalizeOrigin(origin);
      if (normalized === undefined || !(origins.has(normalized) || (checkHost && isLoopbackOrigin(normalized))))
        throw forbidden(`requests from origin ${JSON.stringify(origin.slice(0, 200))} are not allowed (TOOLGATE_ALLOWED_ORIGINS)`);
    }
    if (checkHost) {
      const name = hostName(ctx.get('Host'));
      if (!isLoopbackAddress(name) && !hosts.has(name)) {
        throw forbidden(
          `this gateway listens on loopback and answers only loopback host names, not ${JSON.stringify(name.slice(0, 200))} (TOOLGATE_ALLOWED_HOSTS)`,
        );
      }
    }
    await next();
  };
}
