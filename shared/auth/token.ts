/**
 * Access tokens (spec §2; the README's Tokens section): a JWT signed with HS256 whose payload is exactly
 * `{id, permissions, iat, exp}`. `signToken` is used by `generate-token`; `verifyToken` by the
 * gateway. Verification is written out rather than delegated so that every refusal maps to one
 * named error (token-errors.ts) and the algorithm is pinned before any key is touched.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { isPermission, Permission, PERMISSIONS } from './permissions';
import { TokenAlgorithmRejected, TokenClaimsInvalid, TokenExpired, TokenInvalidSignature, TokenMalformed, TokenMissing, TokenRevoked } from './token-errors';

/** The verified payload. Times are whole seconds since the Unix epoch. */
export interface TokenClaims {
  readonly id: string;
  readonly permissions: readonly Permission[];
  readonly iat: number;
  readonly exp: number;
}

/**
 * What `signToken` signs. Permissions are plain strings: the generator may be asked to sign a
 * value the gateway does not know (it warns the operator); `verifyToken` will refuse such a token.
 */
export interface TokenInput {
  id: string;
  permissions: readonly string[];
  iat: number;
  exp: number;
}

export interface VerifyOptions {
  /** The current time in whole seconds since the epoch (default: now). For tests and replays. */
  nowSeconds?: number;
  /**
   * Revocation: the cut-off for an id, in seconds since the epoch. A token for that id with
   * `iat` before the cut-off is refused with TokenRevoked. `undefined` means nothing is revoked.
   */
  notBefore?: (id: string) => number | undefined;
}

export const TOKEN_ALGORITHM = 'HS256';
/** A token larger than this is refused before decoding (a real one is a few hundred bytes). */
export const MAX_TOKEN_LENGTH = 8192;
/** How far `iat` may lie ahead of this clock (clock skew between issuer and gateway). */
export const MAX_CLOCK_SKEW_SECONDS = 60;

const CLAIM_NAMES = ['id', 'permissions', 'iat', 'exp'] as const;
const SEGMENT = /^[A-Za-z0-9_-]+$/;

const isTime = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * No lone UTF-16 surrogate (`String.prototype.isWellFormed`, not in lib ES2022): a JSON escape
 * such as `"\ud800"` decodes to one, and UTF-8 encoding (Redis keys) maps every lone surrogate
 * to U+FFFD, so two distinct ids would share one key.
 */
export const isWellFormedText = (s: string): boolean => !/\p{Surrogate}/u.test(s);
const ILL_FORMED_ID = 'token claim "id" is not well-formed Unicode (it holds a lone UTF-16 surrogate)';
/** A claim value for a message: JSON-quoted (so control characters stay visible) and capped. */
const quoteClaim = (s: string) => JSON.stringify(s.length > 64 ? `${s.slice(0, 64)}…` : s);

export function signToken(input: TokenInput, secret: string): string {
  if (secret.length === 0) throw new TypeError('signToken needs a non-empty secret');
  if (typeof input.id !== 'string' || input.id.length === 0) throw new TypeError('token id must be a non-empty string');
  if (!isWellFormedText(input.id)) throw new TypeError(ILL_FORMED_ID.replace('token claim "id"', 'token id'));
  if (!Array.isArray(input.permissions) || !input.permissions.every((p) => typeof p === 'string')) {
    throw new TypeError('token permissions must be an array of strings');
  }
  // iat must be > 0: jsonwebtoken replaces a falsy iat with the current time.
  if (!isTime(input.iat) || input.iat === 0) throw new TypeError('token iat must be a positive whole number of seconds');
  if (!isTime(input.exp) || input.exp <= input.iat) throw new TypeError('token exp must be a whole number of seconds after iat');
  // Built field by field so nothing but the four claims can reach the payload; no expiresIn /
  // notBefore / jwtid options, so jsonwebtoken adds nothing either.
  const payload = { id: input.id, permissions: [...input.permissions], iat: input.iat, exp: input.exp };
  return jwt.sign(payload, secret, { algorithm: TOKEN_ALGORITHM });
}

function decodeJsonObject(segment: string, part: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
  } catch {
    throw new TokenMalformed(`token ${part} is not valid JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TokenMalformed(`token ${part} is not a JSON object`);
  }
  return value as Record<string, unknown>;
}

function checkClaims(payload: Record<string, unknown>): TokenClaims {
  for (const name of CLAIM_NAMES) {
    if (!Object.prototype.hasOwnProperty.call(payload, name)) throw new TokenClaimsInvalid(`token claim "${name}" is missing`);
  }
  if (Object.keys(payload).length !== CLAIM_NAMES.length) {
    throw new TokenClaimsInvalid(`token has claims other than ${CLAIM_NAMES.join(', ')}`);
  }
  const { id, permissions, iat, exp } = payload;
  if (typeof id !== 'string' || id.length === 0) throw new TokenClaimsInvalid('token claim "id" must be a non-empty string');
  if (!isWellFormedText(id)) throw new TokenClaimsInvalid(ILL_FORMED_ID);
  if (!Array.isArray(permissions)) throw new TokenClaimsInvalid('token claim "permissions" must be an array');
  const known: Permission[] = [];
  permissions.forEach((p: unknown, i) => {
    if (typeof p !== 'string') throw new TokenClaimsInvalid(`token claim "permissions[${i}]" must be a string`);
    if (!isPermission(p)) {
      // Quoted only because the signature was verified first: the holder of the secret wrote it,
      // and the operator reading the refusal needs to see which value their issuer put there.
      throw new TokenClaimsInvalid(`token claim "permissions[${i}]" is ${quoteClaim(p)}, not a known permission (known: ${PERMISSIONS.join(', ')})`);
    }
    if (!known.includes(p)) known.push(p);
  });
  if (!isTime(iat)) throw new TokenClaimsInvalid('token claim "iat" must be a whole number of seconds');
  if (!isTime(exp)) throw new TokenClaimsInvalid('token claim "exp" must be a whole number of seconds');
  if (exp <= iat) throw new TokenClaimsInvalid('token claim "exp" is not after "iat"');
  return Object.freeze({ id, permissions: Object.freeze(known), iat, exp });
}

/**
 * Checks, in order: present, well-formed, algorithm HS256, signature, claims, expiry,
 * revocation. Throws the matching TokenError; returns the frozen claims.
 */
export function verifyToken(token: string | undefined, secret: string, options: VerifyOptions = {}): TokenClaims {
  if (secret.length === 0) throw new TypeError('verifyToken needs a non-empty secret');
  if (token === undefined || token.length === 0) throw new TokenMissing('no token was presented');
  if (token.length > MAX_TOKEN_LENGTH) throw new TokenMalformed(`token is longer than ${MAX_TOKEN_LENGTH} characters`);

  const parts = token.split('.');
  if (parts.length !== 3) throw new TokenMalformed('token is not three dot-separated parts');
  const [head, body, signature] = parts as [string, string, string];
  if (!SEGMENT.test(head) || !SEGMENT.test(body)) throw new TokenMalformed('token header or payload is not base64url');

  const header = decodeJsonObject(head, 'header');
  if (header.alg !== TOKEN_ALGORITHM) throw new TokenAlgorithmRejected(`token algorithm must be ${TOKEN_ALGORITHM}`);
  // RFC 7515 §4.1.11: extensions listed in `crit` must be understood; we understand none.
  if (header.crit !== undefined) throw new TokenAlgorithmRejected('token header has critical extensions');

  if (signature.length === 0) throw new TokenInvalidSignature('token is unsigned');
  // Compare the canonical encoding, so a second spelling of the same bytes is not accepted.
  const expected = Buffer.from(createHmac('sha256', secret).update(`${head}.${body}`).digest('base64url'));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    // The usual cause is not forgery but a token issued against another secret: generate-token run
    // with another data directory (its default is relative to the working directory) or secret.
    throw new TokenInvalidSignature(
      "token signature does not match this server's secret; it was most likely issued with another secret: " +
        'generate-token / toolgate token run with a different TOOLGATE_DATA_DIR (another jwt-secret file; the default ' +
        './.toolgate is relative to the working directory) or TOOLGATE_JWT_SECRET, or before the secret changed. ' +
        "Issue a new token with the server's data directory or secret",
    );
  }

  return checkTokenTimes(checkClaims(decodeJsonObject(body, 'payload')), options);
}

/**
 * The checks that depend on the clock and on revocation: `verifyToken`'s last step, and all the
 * gateway's cache of verified tokens needs to repeat for claims whose signature and shape were
 * already verified.
 */
export function checkTokenTimes(claims: TokenClaims, options: VerifyOptions = {}): TokenClaims {
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (claims.iat > now + MAX_CLOCK_SKEW_SECONDS) throw new TokenClaimsInvalid('token claim "iat" is in the future');
  // RFC 7519 §4.1.4: not accepted on or after exp.
  if (now >= claims.exp) throw new TokenExpired('token has expired');
  const cutoff = options.notBefore?.(claims.id);
  if (cutoff !== undefined && claims.iat < cutoff) throw new TokenRevoked('token has been revoked');
  return claims;
}
