/**
 * Opaque access tokens (RFC 7662): asked about at the issuer's `introspection_endpoint`, with
 * toolgate's own client credentials (client_secret_basic). What the answer must say to be accepted
 * (audience, expiry, no `cnf`, a subject) is the OAuth authenticator's rule for JWTs, applied by
 * the `accept` function it hands in; this module is the asking: bounded in time like a key-set
 * fetch, bounded in how many requests are in flight at once (a flood of random tokens gets 503s,
 * not unbounded requests), one request for concurrent presentations of the same token, and a
 * refusal remembered for a few seconds only. Accepted answers are kept by the caller (its
 * verified-token cache) until `freshUntilMs`.
 */
import { createHash } from 'node:crypto';
import { TokenError } from '../../shared/auth/token-errors';
import type { IntrospectionConfig } from '../../shared/oauth-config';
import { ErrorCode } from '../../shared/protocol/errors';
import { HttpProblem } from '../errors';
import { authorizationServerUnavailable, type IssuerMetadata } from './oauth-issuers';

/** The authorization server says the token is not active (unknown, expired, revoked, or not an access token it will vouch for). */
export class TokenInactive extends TokenError {
  override readonly name = 'TokenInactive';
}

/** Introspection requests in flight at most, across all tokens (default). */
export const INTROSPECTION_CONCURRENCY = 16;
/** How long a refused token is refused without asking again (default): long enough to absorb a retry loop, short enough not to matter. */
export const INTROSPECTION_NEGATIVE_MS = 5_000;
/** Refused tokens remembered at most (by hash); older ones are simply asked about again. */
const NEGATIVE_ENTRIES = 1_000;

export interface IntrospectorOptions<T extends { readonly exp: number }> {
  config: Readonly<IntrospectionConfig>;
  /** The most one introspection request may take (TOOLGATE_OAUTH_FETCH_TIMEOUT_MS). */
  fetchTimeoutMs: number;
  /** The issuer's metadata (IssuerKeys.metadata): where its introspection endpoint is. */
  metadata(issuer: string): Promise<IssuerMetadata>;
  /** Turns an active answer into what the caller keeps, or throws a TokenError to refuse it. */
  accept(issuer: string, answer: Readonly<Record<string, unknown>>): T;
  /** Requests in flight at most (default INTROSPECTION_CONCURRENCY); past it, 503 at once. */
  concurrency?: number;
  /** How long a refusal is remembered (default INTROSPECTION_NEGATIVE_MS). */
  negativeMs?: number;
}

export interface Introspected<T> {
  readonly entry: T;
  /** When the answer must be asked for again (ms since the epoch): the token's `exp` or the cache time, whichever is first. */
  readonly freshUntilMs: number;
}

const formEncoded = (value: string): string => new URLSearchParams([['', value]]).toString().slice(1);

export class Introspector<T extends { readonly exp: number }> {
  private inFlight = 0;
  private readonly pending = new Map<string, Promise<Introspected<T>>>();
  /** sha256(token) → until when it stays refused, and why. Map order is age. */
  private readonly refused = new Map<string, { until: number; error: TokenError }>();
  private readonly authorization: string;
  private readonly concurrency: number;
  private readonly negativeMs: number;

  constructor(private readonly options: IntrospectorOptions<T>) {
    const { clientId, clientSecret } = options.config;
    // RFC 6749 §2.3.1: each part form-encoded before the Basic encoding.
    this.authorization = `Basic ${Buffer.from(`${formEncoded(clientId)}:${formEncoded(clientSecret)}`).toString('base64')}`;
    this.concurrency = options.concurrency ?? INTROSPECTION_CONCURRENCY;
    this.negativeMs = options.negativeMs ?? INTROSPECTION_NEGATIVE_MS;
  }

  /** The accepted entry for `token`; rejects with a TokenError (401) or an HttpProblem (503: the server could not be asked). */
  introspect(token: string): Promise<Introspected<T>> {
    const key = createHash('sha256').update(token).digest('base64url');
    const known = this.refused.get(key);
    if (known !== undefined) {
      if (Date.now() < known.until) return Promise.reject(known.error);
      this.refused.delete(key);
    }
    const pending = this.pending.get(token);
    if (pending) return pending;
    if (this.inFlight >= this.concurrency) {
      const { issuer } = this.options.config;
      return Promise.reject(
        new HttpProblem(
          503,
          ErrorCode.Unavailable,
          `Unavailable: too many tokens are being checked with the authorization server ${issuer} at once; try again shortly`,
          {
            'Retry-After': '1',
          },
        ),
      );
    }
    this.inFlight++;
    const asked = this.ask(token)
      .catch((err: unknown) => {
        if (err instanceof TokenError) this.remember(key, err);
        throw err;
      })
      .finally(() => {
        this.inFlight--;
        this.pending.delete(token);
      });
    this.pending.set(token, asked);
    return asked;
  }

  private remember(key: string, error: TokenError): void {
    if (this.negativeMs <= 0) return;
    this.refused.set(key, { until: Date.now() + this.negativeMs, error });
    if (this.refused.size > NEGATIVE_ENTRIES) this.refused.delete(this.refused.keys().next().value!);
  }

  private async ask(token: string): Promise<Introspected<T>> {
    const { issuer, cacheSeconds } = this.options.config;
    const { introspectionEndpoint } = await this.options.metadata(issuer);
    if (introspectionEndpoint === undefined) throw authorizationServerUnavailable(issuer, 'its metadata names no https introspection_endpoint', 60);
    const answer = await this.post(issuer, introspectionEndpoint, token);
    if (answer.active !== true) throw new TokenInactive("token is not active (its authorization server's introspection says so)");
    const entry = this.options.accept(issuer, answer);
    return { entry, freshUntilMs: Math.min(entry.exp * 1000, Date.now() + cacheSeconds * 1000) };
  }

  private async post(issuer: string, endpoint: string, token: string): Promise<Readonly<Record<string, unknown>>> {
    const timeoutMs = this.options.fetchTimeoutMs;
    let body: unknown;
    try {
      // The timeout covers the body too: a server that sends headers and then stalls is as slow as one that never answers.
      const response = await fetch(endpoint, {
        method: 'POST',
        redirect: 'manual',
        headers: { authorization: this.authorization, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams({ token, token_type_hint: 'access_token' }).toString(),
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (response.status !== 200) {
        await response.body?.cancel();
        // 401/403: toolgate's own credentials were refused — an operator's problem, not the caller's token.
        throw authorizationServerUnavailable(issuer, `its introspection endpoint answered HTTP ${response.status}`, 5);
      }
      body = await response.json();
    } catch (err) {
      if (err instanceof HttpProblem) throw err;
      const { name } = err as { name?: unknown };
      if (name === 'TimeoutError' || name === 'AbortError')
        throw authorizationServerUnavailable(issuer, `its introspection endpoint did not answer within ${timeoutMs} ms`, 5);
      if (name === 'SyntaxError') throw authorizationServerUnavailable(issuer, 'its introspection endpoint answered something other than JSON', 5);
      throw authorizationServerUnavailable(issuer, 'its introspection endpoint is unreachable', 5);
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw authorizationServerUnavailable(issuer, 'its introspection endpoint answered something other than a JSON object', 5);
    return body as Readonly<Record<string, unknown>>;
  }
}
