/**
 * Who is calling an endpoint. The gateway hands each JSON-RPC endpoint one Authenticator (see
 * `index.ts`, the one list of them) and calls it once per POST, before any body byte is read.
 * An implementation is one module: the HS256 verifier of the spec's tokens (`hs256.ts`) is the
 * first; an OAuth access-token verifier on its own endpoint is the next.
 */
import type { Caller, Permission } from '../../shared/auth/permissions';
import type { TokenError } from '../../shared/auth/token-errors';

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
  /**
   * This endpoint's `WWW-Authenticate` value for a refusal (401), when it must say more than the
   * default RFC 6750 challenge (gateway/errors.ts): OAuth's `resource_metadata` and `scope`
   * (RFC 9728 §5.1), which only the OAuth endpoint may send, since clients that see them drop
   * their configured header and start OAuth discovery.
   */
  challenge?(refusal: TokenError): string;
  /**
   * Step-up (RFC 6750 §3.1, MCP "Scope Challenge Handling"): the `WWW-Authenticate` value of a
   * 403 for a call refused because `caller` lacks `permission`. Absent, such a refusal stays an
   * ordinary JSON-RPC error with HTTP 200, as on `POST /`.
   */
  insufficientScope?(permission: Permission, caller: Caller): string;
  /**
   * Documents served with GET beside the endpoint (path → JSON), e.g. RFC 9728 protected-resource
   * metadata. Their paths and the endpoint answer browsers' CORS requests from allowed origins.
   */
  readonly documents?: Readonly<Record<string, unknown>>;
}

/** Each JSON-RPC endpoint's path (`/`, later `/mcp`) → the authenticator of its callers. */
export type Authenticators = Readonly<Record<string, Authenticator>>;
