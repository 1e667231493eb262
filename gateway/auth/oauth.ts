/**
 * OAuth 2.1 access tokens on their own endpoint (default `/mcp`; DESIGN §4, §9): JWTs (RFC 9068)
 * from the configured authorization servers, verified by jose against each issuer's published
 * keys. Checked: an asymmetric algorithm, `iss` one of TOOLGATE_OAUTH_ISSUERS exactly, the
 * signature, `aud` naming this server's resource URI (or TOOLGATE_OAUTH_AUDIENCE), `exp`/`nbf`
 * with leeway, no `cnf` (a sender-constrained token presented as a plain bearer), a subject.
 * The caller's tenant is the subject namespaced by its issuer (shared/auth/oauth-tenant.ts); its
 * permissions are what its scopes map to. Opaque tokens (anything not shaped like a JWS), when
 * TOOLGATE_OAUTH_INTROSPECTION_* is set, are asked about at that issuer's RFC 7662 endpoint
 * (oauth-introspection.ts) and the answer is held to the same rules.
 */
import type { JWTPayload } from 'jose';
import { oauthTenant } from '../../shared/auth/oauth-tenant';
import type { Caller, Permission } from '../../shared/auth/permissions';
import {
  TokenAlgorithmRejected,
  TokenClaimsInvalid,
  TokenError,
  TokenExpired,
  TokenInvalidSignature,
  TokenMalformed,
  TokenRevoked,
} from '../../shared/auth/token-errors';
import type { Revocations } from '../../shared/bus/bus';
import type { OAuthConfig } from '../../shared/oauth-config';
import type { Authenticator } from './authenticator';
import { VerifiedTokens } from './verified-tokens';
import { bearerToken } from './bearer';
import { jose, type Jose } from './jose';
import { Introspector, type IntrospectorOptions, TokenInactive } from './oauth-introspection';
import { authorizationServerUnavailable, IssuerKeys } from './oauth-issuers';
import { protectedResource } from './oauth-resource';

export { TokenInactive };

/** `iss` is not one of TOOLGATE_OAUTH_ISSUERS (or absent): nothing is fetched for it. */
export class TokenIssuerUnknown extends TokenError {
  override readonly name = 'TokenIssuerUnknown';
}

/** The token carries `cnf`: it is bound to a key (DPoP, mTLS) and is worthless without its proof. */
export class TokenSenderConstrained extends TokenError {
  override readonly name = 'TokenSenderConstrained';
}

/** Signature algorithms accepted: asymmetric only, so no published key can double as an HMAC secret. */
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** Larger than HS256's limit: some authorization servers (Entra ID) put many claims in a token. */
export const MAX_ACCESS_TOKEN_LENGTH = 16_384;
/** RFC 9068 §2.1's `typ`, and what servers that predate it send. */
const TYPES: ReadonlySet<string> = new Set(['at+jwt', 'application/at+jwt', 'jwt']);
/** JWS compact serialization: three base64url parts (the signature may be empty: `alg: none`, refused by name). Anything else is opaque. */
const JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export interface OAuthOptions {
  config: Readonly<OAuthConfig>;
  /** The revocation cut-offs, by tenant key (`toolgate revoke --issuer --sub`). */
  revocations: Pick<Revocations, 'notBefore'>;
  /** Verified tokens kept at most (default 10 000; 0 keeps none). */
  cacheSize?: number;
  /** The issuers' key sets (tests hand in one with their own discovery). */
  issuerKeys?: IssuerKeys;
  /** Introspection limits (defaults INTROSPECTION_CONCURRENCY, INTROSPECTION_NEGATIVE_MS). */
  introspection?: Pick<IntrospectorOptions<Verified>, 'concurrency' | 'negativeMs'>;
}

interface Verified {
  readonly tenant: string;
  readonly permissions: readonly Permission[];
  readonly exp: number;
  readonly nbf: number | undefined;
  readonly iat: number | undefined;
  /** An introspected token's answer is asked for again from then on (ms since the epoch); a JWT's never goes stale. */
  readonly freshUntilMs?: number;
}

const audienceRefused = (config: Readonly<OAuthConfig>): TokenError =>
  new TokenClaimsInvalid(
    `token audience does not name this server: "aud" must contain ${config.audiences.join(' or ')} (request the token with resource=${config.resource})`,
  );

const numeric = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

/**
 * An active introspection answer (RFC 7662 §2.2) held to what jwtVerify checks in a JWT: `iss`
 * (optional in an answer, since it came from that issuer's own endpoint; if present, exactly
 * it), `aud` naming this server, `exp` present (the clock checks follow, as for JWTs). A
 * `token_type` other than Bearer (DPoP, or a refresh token some servers label) is not a bearer
 * access token.
 */
function introspectedClaims(issuer: string, answer: Readonly<Record<string, unknown>>, config: Readonly<OAuthConfig>): JWTPayload {
  if (answer.iss !== undefined && answer.iss !== issuer) throw new TokenIssuerUnknown('the introspection answer names another issuer than the one asked');
  const type = typeof answer.token_type === 'string' ? answer.token_type.toLowerCase() : undefined;
  if (type === 'dpop') throw new TokenSenderConstrained('token is bound to a key (DPoP); this endpoint accepts bearer tokens only');
  if (type !== undefined && type !== 'bearer') throw new TokenMalformed('token is not a bearer access token (introspection "token_type")');
  const aud = typeof answer.aud === 'string' ? [answer.aud] : Array.isArray(answer.aud) ? answer.aud : [];
  if (!aud.some((a) => typeof a === 'string' && config.audiences.includes(a))) throw audienceRefused(config);
  if (!numeric(answer.exp)) throw new TokenClaimsInvalid('token claim "exp" is missing or fails its check');
  if (answer.nbf !== undefined && !numeric(answer.nbf)) throw new TokenClaimsInvalid('token claim "nbf" is missing or fails its check');
  if (answer.iat !== undefined && !numeric(answer.iat)) throw new TokenClaimsInvalid('token claim "iat" is missing or fails its check');
  return answer as JWTPayload;
}

/** jose's error codes → our refusals. Anything not about the token itself is the server's to answer (503 or 500). */
function refusal(err: unknown, issuer: string, config: Readonly<OAuthConfig>): unknown {
  const code = (err as { code?: unknown }).code;
  const claim = (err as { claim?: unknown }).claim;
  switch (code) {
    case 'ERR_JWT_EXPIRED':
      return new TokenExpired('token has expired');
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      if (claim === 'aud') return audienceRefused(config);
      return new TokenClaimsInvalid(`token claim "${String(claim)}" is missing or fails its check`);
    case 'ERR_JWKS_NO_MATCHING_KEY':
      return new TokenInvalidSignature("no key published by the token's issuer matches the token (unknown kid)");
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return new TokenInvalidSignature("token signature does not verify against its issuer's keys");
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
    case 'ERR_JOSE_NOT_SUPPORTED':
      return new TokenAlgorithmRejected('token algorithm is not accepted');
    case 'ERR_JWT_INVALID':
    case 'ERR_JWS_INVALID':
      return new TokenMalformed('token is not a well-formed signed JWT');
    case 'ERR_JWKS_TIMEOUT':
      return authorizationServerUnavailable(issuer, `its key set did not answer within ${config.fetchTimeoutMs} ms`, 5);
    case 'ERR_JWKS_INVALID':
    case 'ERR_JOSE_GENERIC':
      return authorizationServerUnavailable(issuer, 'its key set could not be read', 5);
  }
  // fetch's own failure (connection refused, DNS): the key set is unreachable. (By name: undici's
  // TypeError may come from another realm.)
  const { name, message } = err as { name?: unknown; message?: unknown };
  if (name === 'TypeError' && message === 'fetch failed') return authorizationServerUnavailable(issuer, 'its key set is unreachable', 5);
  return err;
}

/** The token's scopes: a space-separated string (`scope`, `scp`) or an array of strings (`roles`, `permissions`). */
function scopesOf(value: unknown): string[] {
  if (typeof value === 'string') return value.split(' ').filter(Boolean);
  if (Array.isArray(value)) return value.filter((s): s is string => typeof s === 'string');
  return [];
}

function decoded({ decodeJwt, decodeProtectedHeader }: Jose, token: string): { alg: unknown; typ: unknown; iss: unknown } {
  try {
    const header = decodeProtectedHeader(token);
    return { alg: header.alg, typ: header.typ, iss: decodeJwt(token).iss };
  } catch {
    throw new TokenMalformed('token is not a JWT access token (opaque tokens are not accepted on this endpoint)');
  }
}

export function createOAuthAuthenticator(options: OAuthOptions): Authenticator {
  const { config, revocations, cacheSize = 10_000 } = options;
  const keys = options.issuerKeys ?? new IssuerKeys(config.issuers, { fetchTimeoutMs: config.fetchTimeoutMs });
  const resource = protectedResource(config);
  const grants = new Map<string, Permission[]>();
  for (const [scope, permission] of config.scopeMap) grants.set(scope, [...(grants.get(scope) ?? []), permission]);
  const leeway = config.leewaySeconds;
  /** What each token proved (only verified tokens enter it). */
  const verified = new VerifiedTokens<Verified>(cacheSize);

  // The clock and revocation checks, repeated on every request (cached or not).
  const checkTimes = (entry: Verified): void => {
    const now = Math.floor(Date.now() / 1000);
    if (now >= entry.exp + leeway) throw new TokenExpired('token has expired');
    if (entry.nbf !== undefined && entry.nbf > now + leeway) throw new TokenClaimsInvalid('token claim "nbf" is in the future');
    const cutoff = revocations.notBefore(entry.tenant);
    if (cutoff !== undefined && (entry.iat === undefined || entry.iat < cutoff)) throw new TokenRevoked('token has been revoked');
  };
  const callerOf = (entry: Verified): Caller => ({ tenant: entry.tenant, permissions: new Set(entry.permissions) });

  // What a JWT's verified payload and an introspection answer both must show, read the same way.
  const entryOf = (iss: string, payload: JWTPayload): Verified => {
    if (payload.cnf !== undefined) throw new TokenSenderConstrained('token is bound to a key (cnf: DPoP or mTLS); this endpoint accepts bearer tokens only');
    const sub = payload[config.subjectClaim];
    if (typeof sub !== 'string' || sub.length === 0 || sub.length > 256)
      throw new TokenClaimsInvalid(`token claim "${config.subjectClaim}" must be a non-empty string`);
    const permissions = new Set<Permission>();
    for (const scope of scopesOf(payload[config.scopeClaim])) for (const p of grants.get(scope) ?? []) permissions.add(p);
    return Object.freeze({
      tenant: oauthTenant(iss, sub),
      permissions: Object.freeze([...permissions]),
      exp: payload.exp!,
      nbf: payload.nbf,
      iat: payload.iat,
    });
  };

  const verify = async (token: string): Promise<Verified> => {
    const lib = await jose();
    const { alg, typ, iss } = decoded(lib, token);
    if (typeof alg !== 'string' || !ASYMMETRIC_ALGORITHMS.includes(alg)) {
      throw new TokenAlgorithmRejected('token algorithm must be an asymmetric one (RS*, PS*, ES*, EdDSA); HS256 tokens belong on POST /');
    }
    if (typ !== undefined && (typeof typ !== 'string' || !TYPES.has(typ.toLowerCase()))) throw new TokenMalformed('token type ("typ") is not an access token');
    if (typeof iss !== 'string' || !keys.has(iss)) throw new TokenIssuerUnknown('token issuer is not one this endpoint trusts (TOOLGATE_OAUTH_ISSUERS)');
    const getKey = await keys.keys(iss);
    let payload: JWTPayload;
    try {
      ({ payload } = await lib.jwtVerify(token, getKey, {
        issuer: iss,
        audience: [...config.audiences],
        algorithms: ASYMMETRIC_ALGORITHMS,
        clockTolerance: leeway,
        requiredClaims: ['exp'],
      }));
    } catch (err) {
      throw refusal(err, iss, config);
    }
    return entryOf(iss, payload);
  };

  const introspector =
    config.introspection &&
    new Introspector<Verified>({
      config: config.introspection,
      fetchTimeoutMs: config.fetchTimeoutMs,
      metadata: (issuer) => keys.metadata(issuer),
      accept: (issuer, answer) => entryOf(issuer, introspectedClaims(issuer, answer, config)),
      ...options.introspection,
    });
  const introspect = async (token: string): Promise<Verified> => {
    const { entry, freshUntilMs } = await introspector!.introspect(token);
    return Object.freeze({ ...entry, freshUntilMs });
  };

  return {
    async authenticate({ authorization }) {
      const token = bearerToken(authorization);
      if (token.length > MAX_ACCESS_TOKEN_LENGTH) throw new TokenMalformed(`token is longer than ${MAX_ACCESS_TOKEN_LENGTH} characters`);
      const hit = verified.hit(token, checkTimes);
      if (hit && (hit.freshUntilMs === undefined || Date.now() < hit.freshUntilMs)) return callerOf(hit);
      // A stale introspection answer is asked for again; until then the token is not known good.
      if (hit) verified.forget(token);
      const entry = introspector && !JWS.test(token) ? await introspect(token) : await verify(token);
      checkTimes(entry);
      if (entry.freshUntilMs === undefined || Date.now() < entry.freshUntilMs) verified.remember(token, entry);
      return callerOf(entry);
    },
    challenge: resource.challenge,
    insufficientScope: resource.insufficientScope,
    documents: resource.documents,
  };
}
