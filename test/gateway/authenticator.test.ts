/**
 * The Authenticator seam: the HS256 verifier as an implementation (refusals are named rejections,
 * never synchronous throws; the verified-token cache repeats the clock and revocation checks on
 * every hit; each request gets its own Caller), and the app routing one JSON-RPC endpoint per
 * authenticator, refusing at start an endpoint list it could not route.
 */
import pino from 'pino';
import { createApp, AppDeps } from '../../gateway/app';
import type { Authenticator, Authenticators } from '../../gateway/auth/authenticator';
import { BearerSchemeRequired } from '../../gateway/auth/bearer';
import { createHs256Authenticator } from '../../gateway/auth/hs256';
import { listen } from '../../gateway/listen';
import { GatewayMetrics } from '../../gateway/metrics';
import { signToken } from '../../shared/auth/token';
import { TokenExpired, TokenInvalidSignature, TokenMissing, TokenRevoked } from '../../shared/auth/token-errors';
import { createMcpServer } from '../../shared/mcp/server';
import { ToolRegistry } from '../../shared/tools/registry';

const SECRET = 'authenticator-test-secret';
const now = () => Math.floor(Date.now() / 1000);
const bearer = (claims: { id?: string; iat?: number; exp?: number } = {}, secret = SECRET) => {
  const iat = claims.iat ?? now();
  return `Bearer ${signToken({ id: claims.id ?? 'alice', permissions: ['file:read'], iat, exp: claims.exp ?? iat + 3600 }, secret)}`;
};

describe('the HS256 authenticator', () => {
  const cutoffs = new Map<string, number>();
  const hs256 = createHs256Authenticator({ secret: SECRET, revocations: { notBefore: (id) => cutoffs.get(id) } });

  test('a valid token resolves to its caller, a fresh object on every request (cached or not)', async () => {
    const authorization = bearer({ id: 'fresh' });
    const first = await hs256.authenticate({ authorization });
    const second = await hs256.authenticate({ authorization });
    expect(first).toEqual({ tenant: 'fresh', permissions: new Set(['file:read']) });
    expect(second).toEqual(first);
    expect(second).not.toBe(first);
    expect(second.permissions).not.toBe(first.permissions);
  });

  test('every refusal is a rejection naming its check, never a synchronous throw', async () => {
    const refused = (authorization: string | undefined) => {
      let settled: Promise<unknown> | undefined;
      expect(() => (settled = hs256.authenticate({ authorization }))).not.toThrow();
      return expect(settled).rejects;
    };
    await refused(undefined).toBeInstanceOf(TokenMissing);
    await refused('Basic YTpi').toBeInstanceOf(BearerSchemeRequired);
    await refused(bearer({}, 'another-secret')).toBeInstanceOf(TokenInvalidSignature);
    await refused(bearer({ iat: now() - 7200, exp: now() - 1 })).toBeInstanceOf(TokenExpired);
  });

  test('a cached token is still checked against revocation on every request', async () => {
    const authorization = bearer({ id: 'revokee', iat: now() - 10 });
    await expect(hs256.authenticate({ authorization })).resolves.toMatchObject({ tenant: 'revokee' });
    cutoffs.set('revokee', now() - 5);
    await expect(hs256.authenticate({ authorization })).rejects.toBeInstanceOf(TokenRevoked);
    // Dropped from the cache on refusal; verified afresh it is refused the same way.
    await expect(hs256.authenticate({ authorization })).rejects.toBeInstanceOf(TokenRevoked);
    await expect(hs256.authenticate({ authorization: bearer({ id: 'revokee' }) })).resolves.toMatchObject({ tenant: 'revokee' });
  });

  test('with no cache it verifies every time, with the same answers', async () => {
    const uncached = createHs256Authenticator({ secret: SECRET, revocations: { notBefore: () => undefined }, cacheSize: 0 });
    const authorization = bearer({ id: 'uncached' });
    await expect(uncached.authenticate({ authorization })).resolves.toMatchObject({ tenant: 'uncached' });
    await expect(uncached.authenticate({ authorization })).resolves.toMatchObject({ tenant: 'uncached' });
  });

  test('an empty secret is refused at construction', () => {
    expect(() => createHs256Authenticator({ secret: '', revocations: { notBefore: () => undefined } })).toThrow(/non-empty token secret/);
  });
});

describe('one JSON-RPC endpoint per authenticator', () => {
  const deps = (authenticators: Authenticators): AppDeps => ({
    dispatcher: createMcpServer({
      registry: new ToolRegistry([]),
      runner: { run: async () => ({ content: [] }), close: async () => undefined },
      limits: { maxDepth: 64, maxBatch: 10 },
    }),
    authenticators,
    ready: async () => true,
    metrics: new GatewayMetrics({ queueTimeoutMs: 1000, processMetrics: false }),
    maxBodyBytes: 1024,
    origins: { allowedOrigins: [], allowedHosts: [], listenHost: '127.0.0.1' },
    log: pino({ level: 'silent' }),
  });
  const only = (id: string): Authenticator => ({
    authenticate: async ({ authorization }) => {
      if (authorization !== `Bearer ${id}`) throw new TokenMissing('no token was presented');
      return { tenant: id, permissions: new Set() };
    },
  });

  test('each path is answered by its own authenticator; the second path gets the same 405 as /', async () => {
    const server = await listen(createApp(deps({ '/': only('root'), '/mcp': only('oauth') })), '127.0.0.1', 0);
    try {
      const ping = (path: string, token: string) =>
        fetch(new URL(path, server.url), {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
          body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
        });
      expect((await ping('/', 'root')).status).toBe(200);
      expect((await ping('/mcp', 'oauth')).status).toBe(200);
      expect((await ping('/', 'oauth')).status).toBe(401);
      const crossed = await ping('/mcp', 'root');
      expect(crossed.status).toBe(401);
      expect(crossed.headers.get('www-authenticate')).toBe('Bearer realm="toolgate"');
      const get = await fetch(new URL('/mcp', server.url));
      expect(get.status).toBe(405);
      expect(get.headers.get('allow')).toBe('POST');
    } finally {
      await server.close(0);
    }
  });

  test('an endpoint list the app could not route is refused at start with a sentence', () => {
    expect(() => createApp(deps({}))).toThrow(/at least one JSON-RPC endpoint/);
    expect(() => createApp(deps({ '/metrics': only('x') }))).toThrow(/"\/metrics" is taken by the gateway's own metrics route/);
    expect(() => createApp(deps({ mcp: only('x') }))).toThrow(/endpoint path "mcp" must be/);
    expect(() => createApp(deps({ '/mcp/': only('x') }))).toThrow(/endpoint path "\/mcp\/" must be/);
  });
});
