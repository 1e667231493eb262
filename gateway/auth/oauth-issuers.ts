/**
 * The configured authorization servers, each found once: its metadata by RFC 8414 (path-inserted
 * well-known URL) or, failing that, OpenID Connect Discovery, its signing keys from the
 * metadata's `jwks_uri` through jose's remote key set (cached; fetched again for an unknown `kid`
 * at most once per cooldown). Every fetch is bounded by a timeout, and an issuer that could not
 * be reached is not asked again for a short while: its callers get a clear 503 at once, and no
 * caller of another issuer (or of `POST /`) waits on it. The same metadata names the issuer's
 * RFC 7662 `introspection_endpoint`, for opaque tokens (oauth-introspection.ts).
 */
import type { JWTVerifyGetKey } from 'jose';
import { ErrorCode } from '../../shared/protocol/errors';
import { HttpProblem } from '../errors';
import { jose } from './jose';

export interface IssuerOptions {
  /** The most one metadata or key-set fetch may take. */
  fetchTimeoutMs: number;
  /** After a failed discovery, how long the issuer's callers are answered 503 without a new try (default 5 s). */
  retryAfterMs?: number;
  /** Least time between two key-set fetches caused by unknown `kid`s (jose's cooldown; default 30 s). */
  keysCooldownMs?: number;
}

/** What toolgate needs from an authorization server's metadata. */
export interface IssuerMetadata {
  issuer: string;
  jwksUri: string;
  /** RFC 7662's endpoint when the metadata names one over https (or http on loopback). */
  introspectionEndpoint?: string;
}

/** An authorization server could not be asked (down, slow, or answering nonsense): 503, retry later. */
export function authorizationServerUnavailable(issuer: string, why: string, retryAfterSeconds: number): HttpProblem {
  return new HttpProblem(
    503,
    ErrorCode.Unavailable,
    `Unavailable: the authorization server ${issuer} could not be reached to verify the token (${why}); try again shortly`,
    { 'Retry-After': String(retryAfterSeconds) },
  );
}

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/** RFC 8414 §3.1: the well-known segment goes between the host and the issuer's path. */
export function discoveryUrls(issuer: string): string[] {
  const url = new URL(issuer);
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
  return [`${url.origin}/.well-known/oauth-authorization-server${path}`, `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`];
}

/** `raw` as a URL when it is https (or http on loopback); undefined otherwise. */
function secureUrl(raw: unknown): URL | undefined {
  if (typeof raw !== 'string') return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return undefined;
  }
  return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.test(url.hostname)) ? url : undefined;
}

async function fetchJson(url: string, timeoutMs: number): Promise<unknown> {
  const response = await fetch(url, { redirect: 'manual', headers: { accept: 'application/json' }, signal: AbortSignal.timeout(timeoutMs) });
  if (response.status !== 200) {
    await response.body?.cancel();
    throw new Error(`${url} answered HTTP ${response.status}`);
  }
  return response.json();
}

/** The issuer's metadata, checked: `issuer` must be exactly the configured one (RFC 8414 §3.3). */
export async function discoverIssuer(issuer: string, timeoutMs: number): Promise<IssuerMetadata> {
  const failures: string[] = [];
  for (const url of discoveryUrls(issuer)) {
    let doc: unknown;
    try {
      doc = await fetchJson(url, timeoutMs);
    } catch (err) {
      const { name, message } = err as { name?: unknown; message?: unknown };
      const timedOut = name === 'TimeoutError' || name === 'AbortError';
      failures.push(timedOut ? `${url} did not answer within ${timeoutMs} ms` : `${url}: ${String(message ?? err)}`);
      continue;
    }
    const meta = (typeof doc === 'object' && doc !== null ? doc : {}) as { issuer?: unknown; jwks_uri?: unknown; introspection_endpoint?: unknown };
    if (meta.issuer !== issuer) throw new Error(`${url} names another issuer (${JSON.stringify(String(meta.issuer).slice(0, 200))})`);
    if (typeof meta.jwks_uri !== 'string') throw new Error(`${url} has no jwks_uri`);
    const jwks = secureUrl(meta.jwks_uri);
    if (!jwks) throw new Error(`${url}: jwks_uri must be https`);
    // Unusable, it only matters to opaque tokens: their callers are told so (oauth-introspection.ts).
    const introspection = secureUrl(meta.introspection_endpoint);
    return { issuer, jwksUri: jwks.href, ...(introspection && { introspectionEndpoint: introspection.href }) };
  }
  throw new Error(failures.join('; '));
}

interface IssuerState {
  meta?: IssuerMetadata;
  keys?: JWTVerifyGetKey;
  pending?: Promise<IssuerMetadata>;
  failedAt?: number;
  failure?: string;
}

/** Each configured issuer's key set, discovered on first use. */
export class IssuerKeys {
  private readonly states = new Map<string, IssuerState>();
  private readonly retryAfterMs: number;

  constructor(
    issuers: readonly string[],
    private readonly options: IssuerOptions,
    private readonly discover: (issuer: string, timeoutMs: number) => Promise<IssuerMetadata> = discoverIssuer,
  ) {
    for (const issuer of issuers) this.states.set(issuer, {});
    this.retryAfterMs = options.retryAfterMs ?? 5_000;
  }

  /** True when `issuer` is one of the configured ones (exact match). */
  has(issuer: string): boolean {
    return this.states.has(issuer);
  }

  /** The issuer's metadata, discovered once; rejects with a 503 HttpProblem while it cannot be found. */
  async metadata(issuer: string): Promise<IssuerMetadata> {
    const state = this.states.get(issuer);
    if (!state) throw new TypeError(`issuer ${issuer} is not configured`);
    if (state.meta) return state.meta;
    if (state.pending) return state.pending;
    const retrySeconds = Math.ceil(this.retryAfterMs / 1000);
    if (state.failedAt !== undefined && Date.now() - state.failedAt < this.retryAfterMs) {
      throw authorizationServerUnavailable(issuer, state.failure ?? 'discovery failed', retrySeconds);
    }
    state.pending = this.discover(issuer, this.options.fetchTimeoutMs).then(
      (meta) => {
        state.meta = meta;
        state.pending = undefined;
        return meta;
      },
      (err: unknown) => {
        state.pending = undefined;
        state.failedAt = Date.now();
        state.failure = `metadata discovery failed: ${err instanceof Error ? err.message : String(err)}`;
        throw authorizationServerUnavailable(issuer, state.failure, retrySeconds);
      },
    );
    return state.pending;
  }

  /** The issuer's key resolver for jose's jwtVerify; rejects with a 503 HttpProblem while it cannot be found. */
  async keys(issuer: string): Promise<JWTVerifyGetKey> {
    const state = this.states.get(issuer);
    if (!state) throw new TypeError(`issuer ${issuer} is not configured`);
    if (state.keys) return state.keys;
    const [meta, { createRemoteJWKSet }] = await Promise.all([this.metadata(issuer), jose()]);
    // Callers that waited on the same discovery share one key set (and so one cooldown).
    return (state.keys ??= createRemoteJWKSet(new URL(meta.jwksUri), {
      timeoutDuration: this.options.fetchTimeoutMs,
      cooldownDuration: this.options.keysCooldownMs ?? 30_000,
    }));
  }
}
