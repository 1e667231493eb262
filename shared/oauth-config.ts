/**
 * The OAuth endpoint's settings (TOOLGATE_OAUTH_*, TOOLGATE_PUBLIC_URL), parsed by `loadConfig`
 * like every other variable: a bad value stops start-up with a sentence naming the variable.
 * Absent TOOLGATE_OAUTH_ISSUERS, there is no OAuth endpoint and none of the rest is read.
 */
import { isPermission, Permission } from './auth/permissions';
import { ConfigError } from './config-error';

/** The claims an authorization server may carry scopes in (a space-separated string or an array). */
export const SCOPE_CLAIMS = ['scope', 'scp', 'roles', 'permissions'] as const;
export type ScopeClaim = (typeof SCOPE_CLAIMS)[number];

export interface OAuthConfig {
  /** TOOLGATE_OAUTH_ISSUERS: authorization servers whose access tokens are accepted, matched exactly against `iss`. */
  issuers: readonly string[];
  /** TOOLGATE_OAUTH_PATH (default /mcp): the OAuth endpoint, beside `POST /`. */
  path: string;
  /** TOOLGATE_PUBLIC_URL (default http://HOST:PORT on loopback): the origin clients reach the gateway at, without a trailing slash. */
  publicUrl: string;
  /** The canonical resource URI (RFC 8707, RFC 9728 `resource`): publicUrl + path. */
  resource: string;
  /** What `aud` must contain one of: the resource URI and TOOLGATE_OAUTH_AUDIENCE's values. */
  audiences: readonly string[];
  /** TOOLGATE_OAUTH_LEEWAY_S (default 60): clock skew allowed on `exp`, `nbf` and `iat`. */
  leewaySeconds: number;
  /** TOOLGATE_OAUTH_SCOPE_CLAIM (default scope): the claim holding the token's scopes. */
  scopeClaim: ScopeClaim;
  /** TOOLGATE_OAUTH_SUBJECT_CLAIM (default sub): the claim naming the user or client. */
  subjectClaim: string;
  /** TOOLGATE_OAUTH_SCOPE_MAP (default each permission is its own scope): `scope=permission` pairs. */
  scopeMap: ReadonlyArray<readonly [scope: string, permission: Permission]>;
  /** TOOLGATE_OAUTH_DEFAULT_SCOPES (default the file:read and file:list scopes): the 401's least-privilege `scope`. */
  defaultScopes: readonly string[];
  /** TOOLGATE_OAUTH_ROOT_METADATA=1: also serve the metadata at /.well-known/oauth-protected-resource (older clients). */
  rootMetadata: boolean;
  /** TOOLGATE_OAUTH_FETCH_TIMEOUT_MS (default 5000): the most a metadata, JWKS or introspection request may take. */
  fetchTimeoutMs: number;
  /** Opaque access tokens by RFC 7662 introspection; undefined (the default): opaque tokens are refused. */
  introspection: Readonly<IntrospectionConfig> | undefined;
}

/**
 * One pair of client credentials is one registration at one authorization server, so opaque
 * tokens go to one issuer's introspection endpoint: an opaque token names no issuer, and asking
 * the others in turn would hand every token presented to servers that did not issue it.
 */
export interface IntrospectionConfig {
  /** TOOLGATE_OAUTH_INTROSPECTION_ISSUER (default the only issuer; required with several): whose `introspection_endpoint` is asked. */
  issuer: string;
  /** TOOLGATE_OAUTH_INTROSPECTION_CLIENT_ID: toolgate's client at that server (client_secret_basic). */
  clientId: string;
  /** TOOLGATE_OAUTH_INTROSPECTION_CLIENT_SECRET. */
  clientSecret: string;
  /** TOOLGATE_OAUTH_INTROSPECTION_CACHE_S (default 60; 0 asks every time): how long an active answer is reused, never past the token's `exp`. */
  cacheSeconds: number;
}

type Env = Readonly<Record<string, string | undefined>>;

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;
const PATH = /^(\/[A-Za-z0-9._~-]+)+$/;
/** RFC 6749 §3.3 scope-token characters, minus the space that separates them and the `,` and `=` of our lists. */
const SCOPE_TOKEN = /^[\x21\x23-\x2b\x2d-\x3c\x3e-\x5b\x5d-\x7e]+$/;

function httpsUrl(name: string, raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an absolute URL such as https://auth.example.com, got "${raw}"`);
  }
  if (url.search !== '' || url.hash !== '') throw new ConfigError(`${name} must have no query or fragment, got "${raw}"`);
  if (url.protocol === 'https:') return url;
  if (url.protocol === 'http:' && LOOPBACK.test(url.hostname)) return url;
  throw new ConfigError(`${name} must use https:// (http:// only on a loopback address), got "${raw}"`);
}

function scopeMap(env: Env): OAuthConfig['scopeMap'] {
  const raw = env.TOOLGATE_OAUTH_SCOPE_MAP?.trim();
  if (!raw)
    return Object.freeze(['file:read', 'file:write', 'file:list', 'system:exec', 'network:http'].map((p) => Object.freeze([p, p as Permission] as const)));
  const pairs = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((item) => {
      const [scope, permission, extra] = item.split('=').map((s) => s.trim());
      if (extra !== undefined || !scope || !permission || !SCOPE_TOKEN.test(scope) || !isPermission(permission)) {
        throw new ConfigError(`TOOLGATE_OAUTH_SCOPE_MAP must be scope=permission pairs (e.g. toolgate.read=file:read), got "${item}"`);
      }
      return Object.freeze([scope, permission] as const);
    });
  return Object.freeze(pairs);
}

function defaultScopes(env: Env, map: OAuthConfig['scopeMap']): readonly string[] {
  const raw = env.TOOLGATE_OAUTH_DEFAULT_SCOPES?.trim();
  const known = new Set(map.map(([scope]) => scope));
  if (!raw) {
    const scopes = ['file:read', 'file:list'].map((p) => map.find(([, permission]) => permission === p)?.[0]).filter((s): s is string => s !== undefined);
    return Object.freeze([...new Set(scopes)]);
  }
  const scopes = raw.split(/[\s,]+/).filter(Boolean);
  for (const scope of scopes) {
    if (!known.has(scope)) throw new ConfigError(`TOOLGATE_OAUTH_DEFAULT_SCOPES names "${scope}", which TOOLGATE_OAUTH_SCOPE_MAP does not map to a permission`);
  }
  return Object.freeze(scopes);
}

function introspection(env: Env, issuers: readonly string[]): Readonly<IntrospectionConfig> | undefined {
  const clientId = env.TOOLGATE_OAUTH_INTROSPECTION_CLIENT_ID?.trim() ?? '';
  const clientSecret = env.TOOLGATE_OAUTH_INTROSPECTION_CLIENT_SECRET ?? '';
  if (clientId === '' && clientSecret === '') return undefined;
  if (clientId === '' || clientSecret === '')
    throw new ConfigError('TOOLGATE_OAUTH_INTROSPECTION_CLIENT_ID and TOOLGATE_OAUTH_INTROSPECTION_CLIENT_SECRET go together: set both, or neither');
  const named = env.TOOLGATE_OAUTH_INTROSPECTION_ISSUER?.trim();
  if (!named && issuers.length > 1)
    throw new ConfigError(
      'TOOLGATE_OAUTH_INTROSPECTION_ISSUER is required with several TOOLGATE_OAUTH_ISSUERS: the one whose introspection endpoint the credentials are for',
    );
  const issuer = named || issuers[0]!;
  if (!issuers.includes(issuer)) throw new ConfigError(`TOOLGATE_OAUTH_INTROSPECTION_ISSUER must be one of TOOLGATE_OAUTH_ISSUERS exactly, got "${issuer}"`);
  const cache = env.TOOLGATE_OAUTH_INTROSPECTION_CACHE_S?.trim() || '60';
  if (!/^\d+$/.test(cache) || Number(cache) > 3600)
    throw new ConfigError(`TOOLGATE_OAUTH_INTROSPECTION_CACHE_S must be a whole number of seconds from 0 to 3600, got "${cache}"`);
  return Object.freeze({ issuer, clientId, clientSecret, cacheSeconds: Number(cache) });
}

/** The OAuth endpoint's settings, or undefined when TOOLGATE_OAUTH_ISSUERS is unset (no OAuth endpoint). */
export function loadOAuthConfig(env: Env, gateway: { host: string; port: number }): Readonly<OAuthConfig> | undefined {
  const issuers = (env.TOOLGATE_OAUTH_ISSUERS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (issuers.length === 0) return undefined;
  // Kept as written: `iss` is compared to it character for character (RFC 9068 §4, RFC 8414 §3.3).
  for (const issuer of issuers) httpsUrl('each of TOOLGATE_OAUTH_ISSUERS', issuer);

  const path = env.TOOLGATE_OAUTH_PATH?.trim() || '/mcp';
  if (!PATH.test(path)) throw new ConfigError(`TOOLGATE_OAUTH_PATH must be a path such as /mcp (not /; letters, digits, ".", "_", "~", "-"), got "${path}"`);

  const rawPublic = env.TOOLGATE_PUBLIC_URL?.trim();
  if (!rawPublic && !LOOPBACK.test(gateway.host)) {
    throw new ConfigError(
      'TOOLGATE_PUBLIC_URL is required with TOOLGATE_OAUTH_ISSUERS: the https URL clients reach this gateway at (e.g. https://tools.example.com); the resource URI tokens must name is built from it',
    );
  }
  const publicUrl = httpsUrl('TOOLGATE_PUBLIC_URL', rawPublic || `http://${gateway.host}:${gateway.port}`);
  if (publicUrl.pathname !== '/')
    throw new ConfigError(`TOOLGATE_PUBLIC_URL must be an origin without a path (set the path with TOOLGATE_OAUTH_PATH), got "${rawPublic}"`);
  const origin = publicUrl.origin;
  const resource = origin + path;

  const claim = env.TOOLGATE_OAUTH_SCOPE_CLAIM?.trim() || 'scope';
  if (!(SCOPE_CLAIMS as readonly string[]).includes(claim))
    throw new ConfigError(`TOOLGATE_OAUTH_SCOPE_CLAIM must be one of ${SCOPE_CLAIMS.join(', ')}, got "${claim}"`);
  const leeway = env.TOOLGATE_OAUTH_LEEWAY_S?.trim() || '60';
  if (!/^\d+$/.test(leeway) || Number(leeway) > 3600)
    throw new ConfigError(`TOOLGATE_OAUTH_LEEWAY_S must be a whole number of seconds from 0 to 3600, got "${leeway}"`);
  const timeout = env.TOOLGATE_OAUTH_FETCH_TIMEOUT_MS?.trim() || '5000';
  if (!/^\d+$/.test(timeout) || Number(timeout) < 1 || Number(timeout) > 60_000) {
    throw new ConfigError(`TOOLGATE_OAUTH_FETCH_TIMEOUT_MS must be a whole number of milliseconds from 1 to 60000, got "${timeout}"`);
  }
  const map = scopeMap(env);
  const audiences = (env.TOOLGATE_OAUTH_AUDIENCE ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return Object.freeze({
    issuers: Object.freeze(issuers),
    path,
    publicUrl: origin,
    resource,
    audiences: Object.freeze([resource, ...audiences]),
    leewaySeconds: Number(leeway),
    scopeClaim: claim as ScopeClaim,
    subjectClaim: env.TOOLGATE_OAUTH_SUBJECT_CLAIM?.trim() || 'sub',
    scopeMap: map,
    defaultScopes: defaultScopes(env, map),
    rootMetadata: env.TOOLGATE_OAUTH_ROOT_METADATA?.trim() === '1',
    fetchTimeoutMs: Number(timeout),
    introspection: introspection(env, issuers),
  });
}
