/**
 * Who is calling: the bearer token of the `Authorization` header (RFC 6750 §2.1), verified by
 * `verifyToken` (HS256 pinned, every claim checked, expiry) against the configured secret and the
 * bus's revocation cut-offs. Any failure is a TokenError, which the error boundary turns into
 * 401 with `WWW-Authenticate: Bearer`.
 */
import type { Caller } from '../shared/auth/permissions';
import { TokenError, TokenMissing } from '../shared/auth/token-errors';
import { checkTokenTimes, TokenClaims, verifyToken } from '../shared/auth/token';
import type { Revocations } from '../shared/bus/bus';

/** The header is present but is not `Bearer <token>` (e.g. `Basic …`, or a bare token). */
export class BearerSchemeRequired extends TokenError {
  override readonly name = 'BearerSchemeRequired';
}

/** `Bearer` (any case), one or more spaces, then a b64token (RFC 6750 §2.1). */
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** The token of an Authorization header value; throws TokenMissing or BearerSchemeRequired. */
export function bearerToken(header: string | undefined): string {
  if (header === undefined || header.trim() === '') throw new TokenMissing('no token was presented: send Authorization: Bearer <token>');
  const match = BEARER.exec(header);
  if (!match) throw new BearerSchemeRequired('the Authorization header must be "Bearer <token>"');
  return match[1]!;
}

export type Authenticate = (authorization: string | undefined) => Caller;

/**
 * Verified tokens kept at most (least recently used dropped first). Only tokens whose signature
 * and claims passed are kept, so a flood of forged tokens cannot fill it; ~10k entries of a few
 * hundred bytes each is a few MiB at worst.
 */
export const VERIFIED_TOKEN_CACHE_SIZE = 10_000;

/**
 * The HMAC and JSON parse of a token are the same every time the same string is presented, so
 * the result is cached by the exact token string (per authenticator, hence per secret). Expiry,
 * `iat` skew and revocation depend on the clock and on the bus, so they are checked on every
 * request, cached or not (`checkTokenTimes`).
 */
export function createAuthenticator(secret: string, revocations: Pick<Revocations, 'notBefore'>, cacheSize = VERIFIED_TOKEN_CACHE_SIZE): Authenticate {
  if (secret.length === 0) throw new TypeError('the gateway needs a non-empty token secret');
  const notBefore = (id: string) => revocations.notBefore(id);
  /** Token string → its verified claims; Map order is recency. */
  const verified = new Map<string, TokenClaims>();
  // A fresh Caller per request, as before the cache: nothing a request does to it reaches another.
  const callerOf = (claims: TokenClaims): Caller => ({ id: claims.id, permissions: new Set(claims.permissions) });
  return (authorization) => {
    const token = bearerToken(authorization);
    const hit = verified.get(token);
    if (hit) {
      try {
        checkTokenTimes(hit, { notBefore });
      } catch (err) {
        // Refused now (expired, revoked, clock moved back): drop it; a later request verifies afresh.
        verified.delete(token);
        throw err;
      }
      verified.delete(token);
      verified.set(token, hit);
      return callerOf(hit);
    }
    const claims = verifyToken(token, secret, { notBefore });
    if (cacheSize > 0) {
      verified.set(token, claims);
      if (verified.size > cacheSize) verified.delete(verified.keys().next().value!);
    }
    return callerOf(claims);
  };
}
