/**
 * The OAuth endpoint's verifier (gateway/auth/oauth.ts) against a fake authorization server whose
 * keys the test holds: every check of RFC 9068 and the MCP authorization spec refuses with a
 * named error, tenants are namespaced by issuer, and an issuer whose keys are down or slow gets a
 * clear 503 within the fetch timeout while other issuers' callers carry on. Then the same over
 * HTTP: the challenges, the RFC 9728 metadata, step-up 403, CORS, and the two endpoints kept apart.
 */
import { SignJWT } from 'jose';
import { TokenIssuerUnknown, TokenSenderConstrained, createOAuthAuthenticator } from '../../gateway/auth/oauth';
import { HttpProblem } from '../../gateway/errors';
import { oauthTenant } from '../../shared/auth/oauth-tenant';
import { TokenAlgorithmRejected, TokenClaimsInvalid, TokenExpired, TokenInvalidSignature, TokenMalformed, TokenRevoked } from '../../shared/auth/token-errors';
import { ConfigError, loadConfig } from '../../shared/config';
import { loadOAuthConfig } from '../../shared/oauth-config';
import { FakeIssuer, startFakeIssuer } from '../helpers/fake-issuer';

const PUBLIC = 'https://tools.example.test';
const RESOURCE = `${PUBLIC}/mcp`;
const now = () => Math.floor(Date.now() / 1000);

let a: FakeIssuer;
let b: FakeIssuer;
beforeAll(async () => {
  [a, b] = await Promise.all([startFakeIssuer(), startFakeIssuer()]);
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

function authenticator(env: Record<string, string> = {}, cutoffs = new Map<string, number>()) {
  const config = loadOAuthConfig(
    { TOOLGATE_OAUTH_ISSUERS: `${a.issuer},${b.issuer}`, TOOLGATE_PUBLIC_URL: PUBLIC, TOOLGATE_OAUTH_FETCH_TIMEOUT_MS: '400', ...env },
    { host: '127.0.0.1', port: 3000 },
  )!;
  return createOAuthAuthenticator({ config, revocations: { notBefore: (t) => cutoffs.get(t) } });
}
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('the OAuth verifier', () => {
  test('a valid token from a configured issuer: tenant namespaced by issuer, permissions from its scopes', async () => {
    const oauth = authenticator();
    const caller = await oauth.authenticate(bearer(await a.sign({ aud: RESOURCE, scope: 'file:read file:list openid' })));
    expect(caller).toEqual({ tenant: oauthTenant(a.issuer, 'alice'), permissions: new Set(['file:read', 'file:list']) });
    const rs = await oauth.authenticate(bearer(await a.sign({ aud: [RESOURCE, 'other'], scope: 'file:write' }, { alg: 'RS256' })));
    expect(rs.permissions).toEqual(new Set(['file:write']));
    // The same subject at another issuer is another tenant; neither is a name an HS256 id could take.
    const other = await oauth.authenticate(bearer(await b.sign({ aud: RESOURCE, scope: 'file:read' })));
    expect(other.tenant).not.toBe(caller.tenant);
    expect(caller.tenant).toMatch(/^oauth:[A-Za-z0-9_-]{16}:alice$/);
  });

  test.each([
    ['expired beyond the leeway', { exp: now() - 120 }, {}, TokenExpired],
    ['not yet valid (nbf)', { nbf: now() + 600 }, {}, TokenClaimsInvalid],
    ['another audience', { aud: 'https://elsewhere.example/mcp' }, {}, TokenClaimsInvalid],
    ['no audience', { aud: undefined }, {}, TokenClaimsInvalid],
    ['an unknown kid (a key the issuer never published)', {}, { unknownKey: true }, TokenInvalidSignature],
    ['a key-bound token (cnf) presented as a plain bearer', { cnf: { jkt: 'abc' } }, {}, TokenSenderConstrained],
    ['no subject', { sub: undefined }, {}, TokenClaimsInvalid],
    ['a typ that is not an access token', {}, { typ: 'dpop+jwt' }, TokenMalformed],
  ])('refused: %s', async (_what, claims, options, kind) => {
    const token = await a.sign({ aud: RESOURCE, scope: 'file:read', ...claims }, options);
    await expect(authenticator().authenticate(bearer(token))).rejects.toBeInstanceOf(kind);
  });

  test('expiry honours the leeway (TOOLGATE_OAUTH_LEEWAY_S)', async () => {
    const token = await a.sign({ aud: RESOURCE, exp: now() - 30 });
    await expect(authenticator().authenticate(bearer(token))).resolves.toBeDefined();
    await expect(authenticator({ TOOLGATE_OAUTH_LEEWAY_S: '0' }).authenticate(bearer(token))).rejects.toBeInstanceOf(TokenExpired);
  });

  test('the audience may be the application id an authorization server uses instead (TOOLGATE_OAUTH_AUDIENCE)', async () => {
    const token = await a.sign({ aud: 'api://toolgate', scope: 'file:read' });
    await expect(authenticator().authenticate(bearer(token))).rejects.toThrow(/aud.*must contain https:\/\/tools\.example\.test\/mcp/);
    await expect(authenticator({ TOOLGATE_OAUTH_AUDIENCE: 'api://toolgate' }).authenticate(bearer(token))).resolves.toBeDefined();
  });

  test('a token of an issuer not configured is refused without fetching anything for it', async () => {
    const c = await startFakeIssuer();
    try {
      const token = await c.sign({ aud: RESOURCE, scope: 'file:read' });
      await expect(authenticator().authenticate(bearer(token))).rejects.toBeInstanceOf(TokenIssuerUnknown);
      expect(c.jwksFetches).toBe(0);
    } finally {
      await c.close();
    }
  });

  test('algorithm confusion: none, and HS256 keyed with the published RSA key, are refused before any key is used', async () => {
    const claims = { iss: a.issuer, sub: 'alice', aud: RESOURCE, exp: now() + 600, scope: 'file:write' };
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
    const hs = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: 'rs-1' }).sign(new TextEncoder().encode(a.rsaPublicPem));
    const oauth = authenticator();
    await expect(oauth.authenticate(bearer(none))).rejects.toBeInstanceOf(TokenAlgorithmRejected);
    await expect(oauth.authenticate(bearer(hs))).rejects.toBeInstanceOf(TokenAlgorithmRejected);
    // A signature that does not match, on an otherwise good token.
    const good = await a.sign({ aud: RESOURCE });
    const forged = good.slice(0, good.lastIndexOf('.') + 1) + 'A'.repeat(86);
    await expect(oauth.authenticate(bearer(forged))).rejects.toBeInstanceOf(TokenInvalidSignature);
    await expect(oauth.authenticate(bearer('opaque-token-abc'))).rejects.toBeInstanceOf(TokenMalformed);
  });

  test('scopes from scp, roles or permissions, mapped through TOOLGATE_OAUTH_SCOPE_MAP; the subject claim is configurable', async () => {
    const entra = authenticator({
      TOOLGATE_OAUTH_SCOPE_CLAIM: 'scp',
      TOOLGATE_OAUTH_SCOPE_MAP: 'Files.Read=file:read,Files.Read=file:list,Files.Write=file:write',
    });
    const e = await entra.authenticate(bearer(await a.sign({ aud: RESOURCE, scp: 'Files.Read User.Read' })));
    expect(e.permissions).toEqual(new Set(['file:read', 'file:list']));
    const roles = authenticator({ TOOLGATE_OAUTH_SCOPE_CLAIM: 'roles', TOOLGATE_OAUTH_SUBJECT_CLAIM: 'oid' });
    const r = await roles.authenticate(bearer(await a.sign({ aud: RESOURCE, oid: 'object-1', roles: ['system:exec', 42] })));
    expect(r).toEqual({ tenant: oauthTenant(a.issuer, 'object-1'), permissions: new Set(['system:exec']) });
    const auth0 = authenticator({ TOOLGATE_OAUTH_SCOPE_CLAIM: 'permissions' });
    expect((await auth0.authenticate(bearer(await a.sign({ aud: RESOURCE, permissions: ['network:http'] })))).permissions).toEqual(new Set(['network:http']));
  });

  test('revocation by tenant key, also for a token already verified (cached)', async () => {
    const cutoffs = new Map<string, number>();
    const oauth = authenticator({}, cutoffs);
    const token = await a.sign({ aud: RESOURCE, iat: now() - 10 });
    await oauth.authenticate(bearer(token));
    cutoffs.set(oauthTenant(a.issuer, 'alice'), now());
    await expect(oauth.authenticate(bearer(token))).rejects.toBeInstanceOf(TokenRevoked);
    const noIat = await a.sign({ aud: RESOURCE, iat: undefined });
    await expect(oauth.authenticate(bearer(noIat))).rejects.toBeInstanceOf(TokenRevoked);
  });

  test('an unknown kid refetches the key set at most once per cooldown', async () => {
    const c = await startFakeIssuer();
    try {
      const oauth = createOAuthAuthenticator({
        config: loadOAuthConfig({ TOOLGATE_OAUTH_ISSUERS: c.issuer, TOOLGATE_PUBLIC_URL: PUBLIC }, { host: '127.0.0.1', port: 3000 })!,
        revocations: { notBefore: () => undefined },
      });
      await oauth.authenticate(bearer(await c.sign({ aud: RESOURCE })));
      expect(c.jwksFetches).toBe(1);
      for (let i = 0; i < 5; i++)
        await expect(oauth.authenticate(bearer(await c.sign({ aud: RESOURCE }, { unknownKey: true, kid: `k${i}` })))).rejects.toBeInstanceOf(
          TokenInvalidSignature,
        );
      expect(c.jwksFetches).toBe(1);
    } finally {
      await c.close();
    }
  });

  test.each(['down', 'slow', 'refused'] as const)(
    'a key set that is %s: 503 within the timeout, and another issuer’s callers are served meanwhile',
    async (mode) => {
      const c = await startFakeIssuer();
      try {
        c.jwksMode = mode;
        const config = loadOAuthConfig(
          { TOOLGATE_OAUTH_ISSUERS: `${c.issuer},${a.issuer}`, TOOLGATE_PUBLIC_URL: PUBLIC, TOOLGATE_OAUTH_FETCH_TIMEOUT_MS: '400' },
          { host: '127.0.0.1', port: 3000 },
        )!;
        const oauth = createOAuthAuthenticator({ config, revocations: { notBefore: () => undefined } });
        const t0 = Date.now();
        const stuck = oauth.authenticate(bearer(await c.sign({ aud: RESOURCE }))).catch((err: unknown) => ({ err, ms: Date.now() - t0 }));
        const served = await oauth.authenticate(bearer(await a.sign({ aud: RESOURCE, scope: 'file:read' })));
        expect(served.tenant).toBe(oauthTenant(a.issuer, 'alice'));
        expect(Date.now() - t0).toBeLessThan(300);
        const { err, ms } = (await stuck) as { err: HttpProblem; ms: number };
        expect(err).toBeInstanceOf(HttpProblem);
        expect(err.status).toBe(503);
        expect(err.message).toMatch(new RegExp(`authorization server ${c.issuer.replace(/\./g, '\\.')} could not be reached`));
        expect(ms).toBeLessThan(2000);
        // Once the keys are back, the issuer's callers are served again.
        c.jwksMode = 'ok';
        await expect(oauth.authenticate(bearer(await c.sign({ aud: RESOURCE, sub: 'bob' })))).resolves.toBeDefined();
      } finally {
        await c.close();
      }
    },
  );
});

describe('OAuth settings', () => {
  const load = (env: Record<string, string>) => loadConfig({ TOOLGATE_OAUTH_ISSUERS: 'https://auth.example.com/realms/x', ...env }, '/tmp');
  test('defaults: /mcp, the loopback URL, the five permissions as scopes, read and list by default', () => {
    expect(loadConfig({}, '/tmp').oauth).toBeUndefined();
    const oauth = load({ TOOLGATE_PORT: '3100' }).oauth!;
    expect(oauth).toMatchObject({
      path: '/mcp',
      resource: 'http://127.0.0.1:3100/mcp',
      leewaySeconds: 60,
      scopeClaim: 'scope',
      subjectClaim: 'sub',
      defaultScopes: ['file:read', 'file:list'],
    });
    expect(load({ TOOLGATE_OAUTH_SCOPE_MAP: 'toolgate.read=file:read,toolgate.list=file:list' }).oauth!.defaultScopes).toEqual([
      'toolgate.read',
      'toolgate.list',
    ]);
  });
  test.each([
    [{ TOOLGATE_OAUTH_ISSUERS: 'http://auth.example.com' }, /https:\/\/ \(http:\/\/ only on a loopback address\)/],
    [{ TOOLGATE_HOST: '0.0.0.0' }, /TOOLGATE_PUBLIC_URL is required/],
    [{ TOOLGATE_PUBLIC_URL: 'https://tools.example.com/base' }, /without a path/],
    [{ TOOLGATE_OAUTH_PATH: '/' }, /TOOLGATE_OAUTH_PATH/],
    [{ TOOLGATE_OAUTH_SCOPE_MAP: 'read=file:nope' }, /scope=permission/],
    [{ TOOLGATE_OAUTH_DEFAULT_SCOPES: 'admin' }, /does not map/],
    [{ TOOLGATE_OAUTH_SCOPE_CLAIM: 'groups' }, /one of scope, scp, roles, permissions/],
  ])('refused with a sentence: %j', (env, message) => {
    expect(() => load(env)).toThrow(ConfigError);
    expect(() => load(env)).toThrow(message);
  });
});
