/**
 * Why a token was refused. One small class per check so the gateway can map them to a reply in
 * one place (all are `TokenError`, all mean "no valid identity"). Messages name the check that
 * failed and never quote the token or values taken from it: the token is a credential, and
 * anything decoded from it is attacker-controlled text that would otherwise land in logs. The one
 * exception is an unknown permission of a token whose signature verified: the secret's holder
 * wrote it, and the operator needs to see it (JSON-quoted and capped).
 */
export abstract class TokenError extends Error {}

/** No token was presented (absent or empty). */
export class TokenMissing extends TokenError {
  override readonly name = 'TokenMissing';
}

/** Not a compact JWS of three base64url parts carrying JSON objects, or too large. */
export class TokenMalformed extends TokenError {
  override readonly name = 'TokenMalformed';
}

/** The header names an algorithm other than HS256 (e.g. `none`, RS256) or carries `crit`. */
export class TokenAlgorithmRejected extends TokenError {
  override readonly name = 'TokenAlgorithmRejected';
}

/** The signature is missing or does not match the secret. */
export class TokenInvalidSignature extends TokenError {
  override readonly name = 'TokenInvalidSignature';
}

/** A claim is missing, has the wrong type or value, or an unexpected claim is present. */
export class TokenClaimsInvalid extends TokenError {
  override readonly name = 'TokenClaimsInvalid';
}

/** `exp` has passed. */
export class TokenExpired extends TokenError {
  override readonly name = 'TokenExpired';
}

/** Issued before the revocation cut-off recorded for its id. */
export class TokenRevoked extends TokenError {
  override readonly name = 'TokenRevoked';
}
