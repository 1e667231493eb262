/**
 * The OAuth endpoint as a protected resource (RFC 9728): its metadata document, where it is
 * served, and the challenges that point clients to it — `resource_metadata` and a least-privilege
 * `scope` on a 401, `error="insufficient_scope"` with the scopes a call needs on a 403 (MCP
 * step-up). Only this endpoint says any of this: `POST /`'s challenge stays RFC 6750's bare one.
 */
import type { Caller, Permission } from '../../shared/auth/permissions';
import { TokenError, TokenMissing } from '../../shared/auth/token-errors';
import type { OAuthConfig } from '../../shared/oauth-config';
import { challengeError, quotable } from '../errors';

export const METADATA_PREFIX = '/.well-known/oauth-protected-resource';

export interface ProtectedResource {
  /** The metadata's absolute URL, as the challenges name it. */
  readonly metadataUrl: string;
  /** Path → document: the metadata at its RFC 9728 §3.1 path (and at the root one when asked for). */
  readonly documents: Readonly<Record<string, unknown>>;
  challenge(refusal: TokenError): string;
  insufficientScope(permission: Permission, caller: Caller): string;
}

export function protectedResource(config: Readonly<OAuthConfig>): ProtectedResource {
  const metadataPath = METADATA_PREFIX + config.path;
  const metadataUrl = config.publicUrl + metadataPath;
  const scopes = [...new Set(config.scopeMap.map(([scope]) => scope))];
  const document = Object.freeze({
    resource: config.resource,
    authorization_servers: [...config.issuers],
    scopes_supported: scopes,
    bearer_methods_supported: ['header'],
    resource_name: 'toolgate',
  });
  const documents: Record<string, unknown> = { [metadataPath]: document };
  if (config.rootMetadata) documents[METADATA_PREFIX] = document;
  /** The first scope granting each permission (what a client should ask for). */
  const scopeFor = new Map<Permission, string>();
  for (const [scope, permission] of config.scopeMap) if (!scopeFor.has(permission)) scopeFor.set(permission, scope);
  const defaults = config.defaultScopes.join(' ');
  const where = `resource_metadata="${metadataUrl}"`;
  return {
    metadataUrl,
    documents: Object.freeze(documents),
    challenge(refusal) {
      if (refusal instanceof TokenMissing) return `Bearer ${where}, scope="${defaults}"`;
      return `Bearer error="${challengeError(refusal)}", error_description="${quotable(refusal.message)}", ${where}, scope="${defaults}"`;
    },
    // The scopes the caller holds plus the one it lacks: the official SDK client asks for exactly
    // the challenge's scopes on step-up, so naming only the missing one would cost it the others.
    insufficientScope(permission, caller) {
      const needed = scopeFor.get(permission);
      const held = [...scopeFor].filter(([p]) => caller.permissions.has(p)).map(([, scope]) => scope);
      const scope = [...new Set([...held, ...(needed === undefined ? [] : [needed])])].join(' ');
      const description = needed === undefined ? `no scope grants ${permission}` : `this call needs the ${needed} scope`;
      return `Bearer error="insufficient_scope", scope="${scope}", ${where}, error_description="${quotable(description)}"`;
    },
  };
}
