/**
 * The tenant key of an OAuth caller (docs/architecture.md, "Names"). A subject is only unique
 * within its issuer, so the key carries the issuer: `oauth:<issuer tag>:<sub>`, the tag being the
 * first 16 characters of base64url(SHA-256(issuer)) (96 bits: two configured issuers never share
 * one by accident, and nobody can pick an issuer URL to collide with another's without breaking
 * SHA-256). No HS256 token can name such a tenant: the HS256 authenticator refuses every `id`
 * that starts with the prefix, and `toolgate token` will not issue one.
 */
import { createHash } from 'node:crypto';

export const OAUTH_TENANT_PREFIX = 'oauth:';

/** The issuer's tag in a tenant key: stable across restarts and gateways, 16 URL-safe characters. */
export function issuerTag(issuer: string): string {
  return createHash('sha256').update(issuer, 'utf8').digest('base64url').slice(0, 16);
}

/** The tenant key of subject `sub` of `issuer` (the issuer exactly as configured and as in `iss`). */
export function oauthTenant(issuer: string, sub: string): string {
  return `${OAUTH_TENANT_PREFIX}${issuerTag(issuer)}:${sub}`;
}

/** True for a key only an OAuth access token can produce; HS256 ids must never look like this. */
export const isOAuthTenant = (tenant: string): boolean => tenant.startsWith(OAUTH_TENANT_PREFIX);
