/**
 * The spec's tokens: a bearer JWT verified by `verifyToken` (HS256 pinned, every claim checked,
 * expiry) against the configured secret and the bus's revocation cut-offs.
 */
import { isOAuthTenant, OAUTH_TENANT_PREFIX } from '../../shared/auth/oauth-tenant';
import type { Caller } from '../../shared/auth/permissions';
import { TokenClaimsInvalid } from '../../shared/auth/token-errors';
import { checkTokenTimes, TokenClaims, verifyToken } from '../../shared/auth/token';
import type { Revocations } from '../../shared/bus/bus';
import type { Authenticator } from './authenticator';
import { VerifiedTokens } from './verified-tokens';
import { bearerToken } from './bearer';

export interface Hs256Options {
  /** The token signing secret (already resolved: TOOLGATE_JWT_SECRET or the data directory's file). */
  secret: string;
  /** The revocation cut-offs, as the bus keeps them. */
  revocations: Pick<Revocations, 'notBefore'>;
  /** Verified tokens kept at most (default VERIFIED_TOKEN_CACHE_SIZE; 0 keeps none). */
  cacheSize?: number;
}

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
export function createHs256Authenticator(options: Hs256Options): Authenticator {
  const { secret, revocations, cacheSize = VERIFIED_TOKEN_CACHE_SIZE } = options;
  if (secret.length === 0) throw new TypeError('the gateway needs a non-empty token secret');
  const notBefore = (id: string) => revocations.notBefore(id);
  const verified = new VerifiedTokens<TokenClaims>(cacheSize);
  const checkTimes = (claims: TokenClaims) => checkTokenTimes(claims, { notBefore });
  // A fresh Caller per request, as before the cache: nothing a request does to it reaches another.
  const callerOf = (claims: TokenClaims): Caller => ({ tenant: claims.id, permissions: new Set(claims.permissions) });
  return {
    // async: every refusal below, thrown synchronously, becomes the one promise's rejection.
    async authenticate({ authorization }) {
      const token = bearerToken(authorization);
      const hit = verified.hit(token, checkTimes);
      if (hit) return callerOf(hit);
      const claims = verifyToken(token, secret, { notBefore });
      // OAuth tenants' keys start with the prefix: no HS256 id may name one (oauth-tenant.ts).
      if (isOAuthTenant(claims.id)) throw new TokenClaimsInvalid(`token claim "id" must not start with "${OAUTH_TENANT_PREFIX}" (reserved for OAuth tenants)`);
      verified.remember(token, claims);
      return callerOf(claims);
    },
  };
}
