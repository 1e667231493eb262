/**
 * The OAuth endpoint over HTTP, on a real gateway: the 401's challenge names the RFC 9728
 * metadata and a least-privilege scope, the metadata is served at its well-known path (and at
 * the root one only when asked), a call needing a scope the token lacks is a 403 step-up with a
 * JSON-RPC body in both protocol eras, tools/list follows the scopes, browsers get CORS from
 * allowed origins only — and `POST /` says nothing of OAuth: the two credentials never cross.
 */
import { oauthTenant } from '../../shared/auth/oauth-tenant';
import { FakeIssuer, startFakeIssuer } from '../helpers/fake-issuer';
import { startTestGateway, TestGateway } from './harness';

const PUBLIC = 'https://tools.example.test';
const RESOURCE = `${PUBLIC}/mcp`;
const METADATA = `${PUBLIC}/.well-known/oauth-protected-resource/mcp`;
const APP = 'https://app.example.test';

let issuer: FakeIssuer;
let gw: TestGateway;
let rooted: TestGateway;
beforeAll(async () => {
  issuer = await startFakeIssuer();
  const env = { TOOLGATE_OAUTH_ISSUERS: issuer.issuer, TOOLGATE_PUBLIC_URL: PUBLIC, TOOLGATE_ALLOWED_ORIGINS: APP };
  [gw, rooted] = await Promise.all([startTestGateway({ env }), startTestGateway({ env: { ...env, TOOLGATE_OAUTH_ROOT_METADATA: '1' } })]);
});
afterAll(async () => {
  await Promise.all([gw?.close(), rooted?.close(), issuer?.close()]);
});

const rpc = (method: string, params: Record<string, unknown> = {}, id = 1) => ({ jsonrpc: '2.0', id, method, params });
function mcp(body: unknown, token: string | null, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(new URL('/mcp', gw.url), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(token === null ? {} : { Authorization: `Bearer ${token}` }), ...headers },
    body: JSON.stringify(body),
  });
}
const token = (scope: string, claims: Record<string, unknown> = {}) => issuer.sign({ aud: RESOURCE, scope, ...claims });

test('no token on /mcp: 401 pointing at the metadata, with the read and list scopes as the least-privilege default', async () => {
  const res = await mcp(rpc('tools/list'), null);
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${METADATA}", scope="file:read file:list"`);
  expect(await res.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32008 } });
  const bad = await mcp(rpc('tools/list'), await token('file:read', { aud: 'https://elsewhere.example' }));
  expect(bad.status).toBe(401);
  expect(bad.headers.get('www-authenticate')).toMatch(
    new RegExp(`^Bearer error="invalid_token", error_description="[^"]+", resource_metadata="${METADATA}", scope="file:read file:list"$`),
  );
});

test('the RFC 9728 metadata at /.well-known/oauth-protected-resource/mcp; none at the root unless asked', async () => {
  const res = await fetch(new URL('/.well-known/oauth-protected-resource/mcp', gw.url));
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({
    resource: RESOURCE,
    authorization_servers: [issuer.issuer],
    scopes_supported: ['file:read', 'file:write', 'file:list', 'system:exec', 'network:http'],
    bearer_methods_supported: ['header'],
    resource_name: 'toolgate',
  });
  expect((await fetch(new URL('/.well-known/oauth-protected-resource', gw.url))).status).toBe(404);
  expect((await fetch(new URL('/.well-known/oauth-protected-resource', rooted.url))).status).toBe(200);
});

test('POST / answers no OAuth discovery, and neither credential works on the other endpoint', async () => {
  const none = await gw.post(rpc('tools/list'), { token: null });
  expect(none.status).toBe(401);
  expect(none.headers.get('www-authenticate')).toBe('Bearer realm="toolgate"');
  const oauthOnRoot = await gw.post(rpc('tools/list'), { token: await token('file:read') });
  expect(oauthOnRoot.status).toBe(401);
  expect(oauthOnRoot.headers.get('www-authenticate')).not.toMatch(/resource_metadata/);
  const hsOnMcp = await mcp(rpc('tools/list'), gw.token());
  expect(hsOnMcp.status).toBe(401);
  expect(((await hsOnMcp.json()) as { error: { message: string } }).error.message).toMatch(/asymmetric.*HS256 tokens belong on POST \//);
  // No HS256 id can name an OAuth tenant.
  const squatter = await gw.post(rpc('tools/list'), { token: gw.token({ id: oauthTenant(issuer.issuer, 'alice') }) });
  expect(squatter.status).toBe(401);
});

test('tools/list shows what the scopes allow; a call needing more is a 403 step-up naming the scopes, with a JSON-RPC body', async () => {
  const readList = await token('file:read file:list');
  const listed = (await (await mcp(rpc('tools/list'), readList)).json()) as { result: { tools: Array<{ name: string }> } };
  expect(listed.result.tools.map((t) => t.name).sort()).toEqual(
    ['read_file', 'read_multiple_files', 'search_text', 'list_directory', 'directory_tree', 'search_files', 'get_file_info'].sort(),
  );
  const ok = await mcp(rpc('tools/call', { name: 'list_directory', arguments: { path: '.' } }), readList);
  expect(ok.status).toBe(200);
  const denied = await mcp(rpc('tools/call', { name: 'write_file', arguments: { path: 'a.txt', content: 'x' } }, 7), readList);
  expect(denied.status).toBe(403);
  expect(denied.headers.get('www-authenticate')).toBe(
    `Bearer error="insufficient_scope", scope="file:read file:list file:write", resource_metadata="${METADATA}", error_description="this call needs the file:write scope"`,
  );
  expect(await denied.json()).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32003, data: { permission: 'file:write' } } });
  // The same on POST /: an ordinary JSON-RPC error with 200, as before.
  const root = await gw.post(rpc('tools/call', { name: 'write_file', arguments: { path: 'a.txt', content: 'x' } }), {
    token: gw.token({ permissions: ['file:read'] }),
  });
  expect(root.status).toBe(200);
  expect(root.headers.get('www-authenticate')).toBeNull();
});

test('MCP 2026-07-28 requests on /mcp: answered, and stepped up the same way', async () => {
  const V = '2026-07-28';
  const envelope = { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} };
  const call = (name: string, args: Record<string, unknown>) => ({
    ...rpc('tools/call', { name, arguments: args }),
    params: { name, arguments: args, _meta: envelope },
  });
  const headers = (name: string) => ({
    'MCP-Protocol-Version': V,
    'Mcp-Method': 'tools/call',
    'Mcp-Name': name,
    Accept: 'application/json, text/event-stream',
  });
  const writer = await token('file:write file:read', { sub: 'modern' });
  const written = await mcp(call('write_file', { path: 'm.txt', content: 'modern' }), writer, headers('write_file'));
  expect(written.status).toBe(200);
  expect(await written.json()).toMatchObject({ result: { resultType: 'complete' } });
  const denied = await mcp(call('run_command', { command: 'true' }), writer, headers('run_command'));
  expect(denied.status).toBe(403);
  expect(denied.headers.get('www-authenticate')).toMatch(/error="insufficient_scope", scope="file:read file:write system:exec"/);
});

test('CORS: an allowed origin gets its preflight and the challenge exposed; another origin is refused; POST / has no CORS', async () => {
  const preflight = await fetch(new URL('/mcp', gw.url), {
    method: 'OPTIONS',
    headers: { Origin: APP, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' },
  });
  expect(preflight.status).toBe(204);
  expect(preflight.headers.get('access-control-allow-origin')).toBe(APP);
  expect(preflight.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
  const refused = await mcp(rpc('tools/list'), null, { Origin: APP });
  expect(refused.status).toBe(401);
  expect(refused.headers.get('access-control-allow-origin')).toBe(APP);
  expect(refused.headers.get('access-control-expose-headers')).toMatch(/WWW-Authenticate/);
  const meta = await fetch(new URL('/.well-known/oauth-protected-resource/mcp', gw.url), { headers: { Origin: APP } });
  expect(meta.headers.get('access-control-allow-origin')).toBe(APP);
  expect((await mcp(rpc('tools/list'), null, { Origin: 'https://evil.example' })).status).toBe(403);
  const root = await gw.post(rpc('tools/list'), { headers: { Origin: APP } });
  expect(root.headers.get('access-control-allow-origin')).toBeNull();
});
