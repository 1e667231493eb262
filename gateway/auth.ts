/**
 * Who is calling: the bearer token of the `Authorization` header (RFC 6750 §2.1), verified by
 * `verifyToken` (HS256 pinned, every claim checked, expiry) against the configured secret and the
 * bus's revocation cut-offs. Any failure is a TokenError, which the error boundary turns into
 * 401 with `WWW-Authenticate: Bearer`.
 */
import type { Caller } from '../shared/auth/permissions';
import { TokenError, TokenMissing } from '../shared/auth/token-errors';
import { verifyToken } from '../shared/auth/token';
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

export function createAuthenticator(secret: string, revocations: Pick<Revocations, 'notBefore'>): Authenticate {
  if (secret.length === 0) throw new TypeError('the gateway needs a non-empty token secret');
  const notBefore = (id: string) => revocations.notBefore(id);
  return (authorization) => {
    const claims = verifyToken(bearerToken(authorization), secret, { notBefore });
    return { id: claims.id, permissions: new Set(claims.permissions) };
  };
}
