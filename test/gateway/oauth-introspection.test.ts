/**
 * Opaque access tokens by RFC 7662 introspection (gateway/auth/oauth-introspection.ts) against a
 * fake authorization server on loopback: the request toolgate sends, the answer held to the JWT
 * rules (active, audience, expiry, cnf, issuer, subject, scopes), accepted answers reused until
 * the cache time or `exp`, refusals only briefly, a slow or failing endpoint answered 503 within
 * the timeout while everyone else carries on, and a flood of unknown tokens kept to a fixed number
 * of requests in flight.
 */
import { randomBytes } from 'node:crypto';
import { createOAuthAuthenticator, TokenInactive, TokenIssuerUnknown, TokenSenderConstrained } from '../../gateway/auth/oauth';
import { HttpProblem } from '../../gateway/errors';
import { oauthTenant } from '../../shared/auth/oauth-tenant';
import { TokenClaimsInvalid, TokenExpired, TokenMalformed, TokenRevoked } from '../../shared/auth/token-errors';
import { ConfigError, loadConfig } from '../../shared/config';
import { loadOAuthConfig } from '../../shared/oauth-config';
import { FakeIssuer, startFakeIssuer } from '../helpers/fake-issuer';

const PUBLIC = 'https://tools.example.test';
const RESOURCE = `${PUBLIC}/mcp`;
const now = () => Math.floor(Date.now() / 1000);
const opaque = () => randomBytes(32).toString('base64url');
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

let a: FakeIssuer;
let b: FakeIssuer;
beforeAll(async () => {
  [a, b] = await Promise.all([startFakeIssuer(), startFakeIssuer()]);
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

interface Setup {
  env?: Record<string, string>;
  cutoffs?: Map<string, number>;
  concurrency?: number;
  negativeMs?: number;
  issuer?: FakeIssuer;
}
function authenticator({ env = {}, cutoffs = new Map(), concurrency, negativeMs, issuer = a }: Setup = {}) {
  const config = loadOAuthConfig(
    {
      TOOLGATE_OAUTH_ISSUERS: `${issuer.issuer},${b.issuer}`,
      TOOLGATE_OAUTH_INTROSPECTION_ISSUER: issuer.issuer,
      TOOLGATE_OAUTH_INTROSPECTION_CLIENT_ID: 'toolgate rs',
      TOOLGATE_OAUTH_INTROSPECTION_CLIENT_SECRET: 's3cret:+/',
      TOOLGATE_PUBLIC_URL: PUBLIC,
      TOOLGATE_OAUTH_FETCH_TIMEOUT_MS: '400',
      ...env,
    },
    { host: '127.0.0.1', port: 3000 },
  )!;
  return createOAuthAuthenticator({ config, revocations: { notBefore: (t) => cutoffs.get(t) }, introspection: { concurrency, negativeMs } });
}
/** A token the fake server calls active with these claims. */
function active(claims: Record<string, unknown> = {}, issuer = a): string {
  const token = opaque();
  issuer.introspection.set(token, {
    active: true,
    iss: issuer.issuer,
    sub: 'alice',
    aud: RESOURCE,
    exp: now() + 600,
    iat: now(),
    scope: 'file:read file:list',
    ...claims,
  });
  return token;
}
const asked = (token: string, issuer = a) => issuer.introspections.filter((r) => r.form.token === token).length;

describe('opaque tokens by introspection', () => {
  test('an active token: the RFC 7662 request (form, hint, client_secret_basic), tenant namespaced by issuer, scopes mapped', async () => {
    const token = active({ scope: 'file:read file:list openid' });
    const caller = await authenticator().authenticate(bearer(token));
    expect(caller).toEqual({ tenant: oauthTenant(a.issuer, 'alice'), permissions: new Set(['file:read', 'file:list']) });
    const request = a.introspections.find((r) => r.form.token === token)!;
    expect(request.contentType).toBe('application/x-www-form-urlencoded');
    expect(request.form).toEqual({ token, token_type_hint: 'access_token' });
    // RFC 6749 §2.3.1: each part form-encoded, then Basic.
    expect(request.authorization).toBe(`Basic ${Buffer.from('toolgate+rs:s3cret%3A%2B%2F').toString('base64')}`);
    // The same scope map and subject claim as JWTs.
    const entra = authenticator({
      env: { TOOLGATE_OAUTH_SCOPE_CLAIM: 'scp', TOOLGATE_OAUTH_SCOPE_MAP: 'Files.Read=file:read', TOOLGATE_OAUTH_SUBJECT_CLAIM: 'oid' },
    });
    const e = await entra.authenticate(bearer(active({ scp: ['Files.Read', 'User.Read'], oid: 'object-1' })));
    expect(e).toEqual({ tenant: oauthTenant(a.issuer, 'object-1'), permissions: new Set(['file:read']) });
  });

  test.each([
    ['inactive', { active: false }, TokenInactive, /not active/],
    ['another audience', { aud: 'https://elsewhere.example/mcp' }, TokenClaimsInvalid, /audience does not name this server/],
    ['no audience', { aud: undefined }, TokenClaimsInvalid, /audience/],
    ['expired beyond the leeway', { exp: now() - 120 }, TokenExpired, /expired/],
    ['no exp', { exp: undefined }, TokenClaimsInvalid, /"exp"/],
    ['not yet valid (nbf)', { nbf: now() + 600 }, TokenClaimsInvalid, /"nbf"/],
    ['bound to a key (cnf)', { cnf: { jkt: 'abc' } }, TokenSenderConstrained, /cnf/],
    ['a DPoP token_type', { token_type: 'DPoP' }, TokenSenderConstrained, /DPoP/],
    ['a refresh token', { token_type: 'refresh_token' }, TokenMalformed, /token_type/],
    ['another issuer named in the answer', { iss: 'https://other.example' }, TokenIssuerUnknown, /another issuer/],
    ['no subject', { sub: undefined }, TokenClaimsInvalid, /"sub"/],
  ])('refused (401 invalid_token): %s', async (_what, claims, kind, message) => {
    const token = active(claims);
    const refused = authenticator().authenticate(bearer(token));
    await expect(refused).rejects.toBeInstanceOf(kind);
    await expect(refused).rejects.toThrow(message);
  });

  test('an answer without iss is that issuer’s (it came from its own endpoint); TOOLGATE_OAUTH_AUDIENCE counts as for JWTs', async () => {
    await expect(authenticator().authenticate(bearer(active({ iss: undefined })))).resolves.toMatchObject({ tenant: oauthTenant(a.issuer, 'alice') });
    const appId = active({ aud: ['api://toolgate', 'other'] });
    await expect(authenticator().authenticate(bearer(appId))).rejects.toBeInstanceOf(TokenClaimsInvalid);
    await expect(authenticator({ env: { TOOLGATE_OAUTH_AUDIENCE: 'api://toolgate' }, negativeMs: 0 }).authenticate(bearer(appId))).resolves.toBeDefined();
  });

  test('JWTs still go to signature verification, never to introspection; without credentials opaque tokens are refused as before', async () => {
    const before = a.introspections.length;
    const caller = await authenticator().authenticate(bearer(await b.sign({ aud: RESOURCE, scope: 'file:read' })));
    expect(caller.tenant).toBe(oauthTenant(b.issuer, 'alice'));
    expect(a.introspections.length).toBe(before);
    const plain = createOAuthAuthenticator({
      config: loadOAuthConfig({ TOOLGATE_OAUTH_ISSUERS: a.issuer, TOOLGATE_PUBLIC_URL: PUBLIC }, { host: '127.0.0.1', port: 3000 })!,
      revocations: { notBefore: () => undefined },
    });
    const token = active();
    await expect(plain.authenticate(bearer(token))).rejects.toThrow(/opaque tokens are not accepted/);
    expect(asked(token)).toBe(0);
  });

  test('an active answer is reused until TOOLGATE_OAUTH_INTROSPECTION_CACHE_S, then asked again', async () => {
    const oauth = authenticator({ env: { TOOLGATE_OAUTH_INTROSPECTION_CACHE_S: '1' } });
    const token = active();
    for (let i = 0; i < 5; i++) await oauth.authenticate(bearer(token));
    expect(asked(token)).toBe(1);
    await new Promise((r) => setTimeout(r, 1100));
    a.introspection.set(token, { active: false }); // revoked at the authorization server meanwhile
    await expect(oauth.authenticate(bearer(token))).rejects.toBeInstanceOf(TokenInactive);
    expect(asked(token)).toBe(2);
  });

  test('never reused past the token’s exp, whatever the cache time', async () => {
    const oauth = authenticator({ env: { TOOLGATE_OAUTH_LEEWAY_S: '0' } });
    const token = active({ exp: now() + 1 });
    await oauth.authenticate(bearer(token));
    await new Promise((r) => setTimeout(r, 2100));
    await expect(oauth.authenticate(bearer(token))).rejects.toBeInstanceOf(TokenExpired);
    // Cache time 0: asked every time.
    const always = authenticator({ env: { TOOLGATE_OAUTH_INTROSPECTION_CACHE_S: '0' } });
    const other = active();
    await always.authenticate(bearer(other));
    await always.authenticate(bearer(other));
    expect(asked(other)).toBe(2);
  });

  test('a refusal is remembered for a few seconds only; concurrent presentations of one token make one request', async () => {
    const oauth = authenticator({ negativeMs: 300 });
    const token = opaque();
    await expect(oauth.authenticate(bearer(token))).rejects.toBeInstanceOf(TokenInactive);
    await expect(oauth.authenticate(bearer(token))).rejects.toBeInstanceOf(TokenInactive);
    expect(asked(token)).toBe(1);
    await new Promise((r) => setTimeout(r, 350));
    a.introspection.set(token, { active: true, sub: 'late', aud: RESOURCE, exp: now() + 600 });
    await expect(oauth.authenticate(bearer(token))).resolves.toMatchObject({ tenant: oauthTenant(a.issuer, 'late') });
    expect(asked(token)).toBe(2);
    const burst = active();
    const callers = await Promise.all(Array.from({ length: 8 }, () => oauth.authenticate(bearer(burst))));
    expect(callers.every((c) => c.tenant === oauthTenant(a.issuer, 'alice'))).toBe(true);
    expect(asked(burst)).toBe(1);
  });

  test('revocation by tenant key applies to introspected tokens, cached or not', async () => {
    const cutoffs = new Map<string, number>();
    const oauth = authenticator({ cutoffs });
    const token = active({ iat: now() - 10 });
    await oauth.authenticate(bearer(token));
    cutoffs.set(oauthTenant(a.issuer, 'alice'), now());
    await expect(oauth.authenticate(bearer(token))).rejects.toBeInstanceOf(TokenRevoked);
  });

  test.each(['slow', 'down'] as const)(
    'an introspection endpoint that is %s: 503 within the timeout; JWT callers and cached opaque tokens are served meanwhile',
    async (mode) => {
      const oauth = authenticator();
      const cached = active();
      await oauth.authenticate(bearer(cached));
      const token = opaque();
      a.introspection.set(token, mode);
      const t0 = Date.now();
      const stuck = oauth.authenticate(bearer(token)).catch((err: unknown) => ({ err, ms: Date.now() - t0 }));
      await expect(oauth.authenticate(bearer(await b.sign({ aud: RESOURCE })))).resolves.toBeDefined();
      await expect(oauth.authenticate(bearer(cached))).resolves.toBeDefined();
      expect(Date.now() - t0).toBeLessThan(300);
      const { err, ms } = (await stuck) as { err: HttpProblem; ms: number };
      expect(err).toBeInstanceOf(HttpProblem);
      expect(err.status).toBe(503);
      expect(err.code).toBe(-32006);
      expect(err.message).toMatch(mode === 'slow' ? /did not answer within 400 ms/ : /answered HTTP 500/);
      expect(ms).toBeLessThan(2000);
      // Not remembered as a refusal: once the server answers, the token is accepted.
      a.introspection.set(token, { active: true, sub: 'alice', aud: RESOURCE, exp: now() + 600 });
      await expect(oauth.authenticate(bearer(token))).resolves.toBeDefined();
    },
  );

  test('a flood of unknown tokens: at most the cap in flight, the rest 503 at once', async () => {
    const oauth = authenticator({ concurrency: 3 });
    const tokens = Array.from({ length: 20 }, () => opaque());
    for (const t of tokens) a.introspection.set(t, 'slow');
    const before = a.introspections.length;
    const t0 = Date.now();
    const results = await Promise.all(tokens.map((t) => oauth.authenticate(bearer(t)).catch((err: unknown) => ({ err, ms: Date.now() - t0 }))));
    const errs = results as { err: HttpProblem; ms: number }[];
    expect(a.introspections.length - before).toBe(3);
    const busy = errs.filter(({ err }) => /too many tokens/.test(err.message));
    expect(busy).toHaveLength(17);
    expect(busy.every(({ err, ms }) => err.status === 503 && err.headers?.['Retry-After'] === '1' && ms < 200)).toBe(true);
    // Slots come back when those requests end.
    await expect(oauth.authenticate(bearer(active()))).resolves.toBeDefined();
  });

  test('an issuer whose metadata names no introspection endpoint: 503 saying so', async () => {
    const c = await startFakeIssuer();
    try {
      c.advertiseIntrospection = false;
      await expect(authenticator({ issuer: c }).authenticate(bearer(opaque()))).rejects.toThrow(/names no https introspection_endpoint/);
    } finally {
      await c.close();
    }
  });
});

describe('introspection settings', () => {
  const load = (env: Record<string, string>) => loadConfig({ TOOLGATE_OAUTH_ISSUERS: 'https://auth.example.com/realms/x', ...env }, '/tmp');
  const creds = { TOOLGATE_OAUTH_INTROSPECTION_CLIENT_ID: 'toolgate', TOOLGATE_OAUTH_INTROSPECTION_CLIENT_SECRET: 'x' };
  test('off by default; with one issuer the credentials are for it; cache 60 s by default', () => {
    expect(load({}).oauth!.introspection).toBeUndefined();
    expect(load(creds).oauth!.introspection).toEqual({
      issuer: 'https://auth.example.com/realms/x',
      clientId: 'toolgate',
      clientSecret: 'x',
      cacheSeconds: 60,
    });
  });
  test.each([
    [{ TOOLGATE_OAUTH_INTROSPECTION_CLIENT_ID: 'toolgate' }, /go together/],
    [{ ...creds, TOOLGATE_OAUTH_ISSUERS: 'https://a.example,https://b.example' }, /INTROSPECTION_ISSUER is required with several/],
    [{ ...creds, TOOLGATE_OAUTH_INTROSPECTION_ISSUER: 'https://c.example' }, /one of TOOLGATE_OAUTH_ISSUERS/],
    [{ ...creds, TOOLGATE_OAUTH_INTROSPECTION_CACHE_S: '-1' }, /CACHE_S must be a whole number/],
  ])('refused with a sentence: %j', (env, message) => {
    expect(() => load(env)).toThrow(ConfigError);
    expect(() => load(env)).toThrow(message);
  });
});
