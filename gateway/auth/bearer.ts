/**
 * The bearer token of an `Authorization` header (RFC 6750 §2.1), for every authenticator whose
 * credentials are bearer tokens.
 */
import { TokenError, TokenMissing } from '../../shared/auth/token-errors';

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
