/**
 * Who is calling an endpoint. The gateway hands each JSON-RPC endpoint one Authenticator (see
 * `index.ts`, the one list of them) and calls it once per POST, before any body byte is read.
 * An implementation is one module: the HS256 verifier of the spec's tokens (`hs256.ts`) is the
 * first; an OAuth access-token verifier on its own endpoint is the next.
 */
import type { Caller } from '../../shared/auth/permissions';

/** What an authenticator may look at: the request's credentials, nothing of Koa. */
export interface AuthRequest {
  /** The `Authorization` header as sent; undefined when absent or empty. */
  readonly authorization: string | undefined;
}

export interface Authenticator {
  /**
   * Resolves to the caller the credentials prove, a fresh object per request (nothing one
   * request does to it reaches another). Rejects with a `TokenError` subclass naming the check
   * that failed (`shared/auth/token-errors.ts`, or a bearer-scheme error from `bearer.ts`): the
   * error boundary answers it with 401 and `WWW-Authenticate: Bearer`. Any other rejection is a
   * bug and becomes a bare 500. Called on every request: one promise, no more (the HTTP path is
   * measured against bare Koa), so caching what does not depend on the clock is the
   * implementation's job.
   */
  authenticate(request: AuthRequest): Promise<Caller>;
}

/** Each JSON-RPC endpoint's path (`/`, later `/mcp`) → the authenticator of its callers. */
export type Authenticators = Readonly<Record<string, Authenticator>>;
