/**
 * Identity and permissions over HTTP (the README's Permissions table). Every forged, expired, malformed or revoked
 * token gets 401 with `WWW-Authenticate: Bearer` and a JSON-RPC error naming the failed check,
 * never the token, and nothing reaches the bus. Each permission sees exactly its tools and is
 * refused the others with -32003 naming the permission.
 */
import { createHmac, generateKeyPairSync } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import jwt from 'jsonwebtoken';
import { PERMISSIONS } from '../../shared/auth/permissions';
import { json, startTestGateway, TestGateway } from './harness';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(async () => {
  await gw?.close();
});

const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);
const claims = (extra: Record<string, unknown> = {}) => ({ id: 'mallory', permissions: [...PERMISSIONS], iat: now(), exp: now() + 3600, ...extra });

/** A compact JWS built by hand, HMAC-signed with `secret` under the named hash (or unsigned). */
function forge(header: Record<string, unknown>, payload: Record<string, unknown>, secret: string | null, hash = 'sha256'): string {
  const head = `${b64(header)}.${b64(payload)}`;
  return `${head}.${secret === null ? '' : createHmac(hash, secret).update(head).digest('base64url')}`;
}
const hs256 = (payload: Record<string, unknown>, secret = gw.secret) => forge({ alg: 'HS256', typ: 'JWT' }, payload, secret);
const without = (name: string) => {
  const c: Record<string, unknown> = claims();
  delete c[name];
  return c;
};

const WRITE = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'write_file', arguments: { path: 'owned.txt', content: 'pwned' } } };

interface Attack {
  name: string;
  header: () => string | undefined;
  /** The failed check the message must name. */
  says: RegExp;
}

const attacks: Attack[] = [
  { name: 'no Authorization header', header: () => undefined, says: /no token/ },
  { name: 'an empty Authorization header', header: () => '', says: /no token/ },
  { name: 'the Basic scheme', header: () => `Basic ${Buffer.from('admin:admin').toString('base64')}`, says: /Bearer/ },
  { name: 'a bare token without a scheme', header: () => gw.token(), says: /Bearer/ },
  { name: 'Bearer with nothing after it', header: () => 'Bearer ', says: /no token|Bearer/ },
  { name: 'Bearer with two tokens', header: () => `Bearer ${gw.token()} ${gw.token()}`, says: /Bearer/ },
  { name: 'garbage', header: () => 'Bearer garbage', says: /three/ },
  { name: 'three garbage parts', header: () => 'Bearer a.b.c', says: /JSON/ },
  { name: 'a non-JSON payload', header: () => `Bearer ${b64({ alg: 'HS256' })}.${b64('not json')}.sig`, says: /signature/ },
  { name: 'a token signed with another secret', header: () => `Bearer ${gw.token({}, 'not-the-secret')}`, says: /signature/ },
  {
    name: 'a tampered payload (permissions widened)',
    header: () => {
      const [h, , s] = gw.token({ permissions: ['file:read'] }).split('.');
      return `Bearer ${h}.${b64(claims())}.${s}`;
    },
    says: /signature/,
  },
  { name: 'alg none, unsigned', header: () => `Bearer ${forge({ alg: 'none', typ: 'JWT' }, claims(), null)}`, says: /algorithm/ },
  { name: 'alg "None" with an HS256 signature', header: () => `Bearer ${forge({ alg: 'None' }, claims(), gw.secret)}`, says: /algorithm/ },
  { name: 'no alg at all', header: () => `Bearer ${forge({ typ: 'JWT' }, claims(), gw.secret)}`, says: /algorithm/ },
  {
    name: 'HS384 signed with the right secret',
    header: () => `Bearer ${jwt.sign(claims(), gw.secret, { algorithm: 'HS384', noTimestamp: true })}`,
    says: /algorithm/,
  },
  { name: 'HS512 signed with the right secret', header: () => `Bearer ${forge({ alg: 'HS512' }, claims(), gw.secret, 'sha512')}`, says: /algorithm/ },
  {
    name: 'RS256 header with an HMAC of the secret (key confusion)',
    header: () => `Bearer ${forge({ alg: 'RS256' }, claims(), gw.secret)}`,
    says: /algorithm/,
  },
  {
    name: 'a real RS256 token',
    header: () => {
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      return `Bearer ${jwt.sign(claims(), privateKey, { algorithm: 'RS256', noTimestamp: true })}`;
    },
    says: /algorithm/,
  },
  { name: 'a crit header', header: () => `Bearer ${forge({ alg: 'HS256', crit: ['exp'] }, claims(), gw.secret)}`, says: /critical/ },
  { name: 'an empty signature', header: () => `Bearer ${forge({ alg: 'HS256' }, claims(), null)}`, says: /unsigned/ },
  { name: 'an expired token', header: () => `Bearer ${gw.token({ iat: now() - 7200, exp: now() - 1 })}`, says: /expired/ },
  { name: 'a token expiring right now', header: () => `Bearer ${gw.token({ iat: now() - 60, exp: now() })}`, says: /expired/ },
  { name: 'iat far in the future', header: () => `Bearer ${gw.token({ iat: now() + 3600, exp: now() + 7200 })}`, says: /future/ },
  ...(['id', 'permissions', 'iat', 'exp'] as const).map((field) => ({
    name: `missing ${field}`,
    header: () => `Bearer ${hs256(without(field))}`,
    says: new RegExp(`"${field}" is missing`),
  })),
  { name: 'id a number', header: () => `Bearer ${hs256(claims({ id: 42 }))}`, says: /"id"/ },
  { name: 'id empty', header: () => `Bearer ${hs256(claims({ id: '' }))}`, says: /"id"/ },
  { name: 'permissions a string', header: () => `Bearer ${hs256(claims({ permissions: 'file:read' }))}`, says: /"permissions"/ },
  { name: 'permissions holding a number', header: () => `Bearer ${hs256(claims({ permissions: [1] }))}`, says: /permissions\[0\]/ },
  {
    name: 'an unknown permission',
    header: () => `Bearer ${hs256(claims({ permissions: ['file:read', 'root'] }))}`,
    says: /permissions\[1\]" is "root", not a known permission/,
  },
  { name: 'an id with a lone surrogate', header: () => `Bearer ${hs256(claims({ id: 'mallory\ud800' }))}`, says: /"id" is not well-formed Unicode/ },
  { name: 'iat a string', header: () => `Bearer ${hs256(claims({ iat: String(now()) }))}`, says: /"iat"/ },
  { name: 'exp fractional', header: () => `Bearer ${hs256(claims({ exp: now() + 0.5 + 3600 }))}`, says: /"exp"/ },
  { name: 'an extra claim', header: () => `Bearer ${hs256(claims({ admin: true }))}`, says: /other than/ },
  { name: 'a token over the size limit', header: () => `Bearer ${hs256(claims({ id: 'x'.repeat(9000) }))}`, says: /longer than/ },
];

describe('token attacks → 401, WWW-Authenticate: Bearer, nothing executed', () => {
  test.each(attacks.map((a) => [a.name, a] as const))('%s', async (_name, attack) => {
    const before = gw.events.length;
    const header = attack.header();
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (header !== undefined) headers.Authorization = header;
    const res = await fetch(gw.url, { method: 'POST', headers, body: JSON.stringify(WRITE) });
    expect(res.status).toBe(401);
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer\b/);
    const body = await json(res);
    expect(body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32008 } });
    expect(body.error.message).toMatch(/^Unauthenticated: /);
    expect(body.error.message).toMatch(attack.says);
    // The token is a credential: neither the body nor the challenge echoes it.
    const token = header?.replace(/^\S+\s+/, '') ?? '';
    if (token.length > 8) {
      for (const part of token.split('.').filter((p) => p.length > 8)) {
        expect(body.error.message).not.toContain(part);
        expect(challenge).not.toContain(part);
      }
    }
    expect(gw.events.length).toBe(before);
    await expect(fs.access(path.join(gw.workspaceOf('mallory'), 'owned.txt'))).rejects.toThrow();
  });

  test('a missing token gets a bare challenge; a bad one says invalid_token', async () => {
    const bare = await fetch(gw.url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    expect(bare.headers.get('www-authenticate')).toBe('Bearer realm="toolgate"');
    const bad = await gw.post(WRITE, { token: 'a.b.c' });
    expect(bad.headers.get('www-authenticate')).toMatch(/^Bearer realm="toolgate", error="invalid_token", error_description="[^"]+"$/);
  });

  test('the bearer scheme is case-insensitive (RFC 7235)', async () => {
    const res = await fetch(gw.url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `bearer ${gw.token()}` },
      body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
    });
    expect(res.status).toBe(200);
  });

  test('every method needs the token, tools/list and ping included', async () => {
    for (const method of ['tools/list', 'ping', 'initialize']) {
      const res = await gw.post({ jsonrpc: '2.0', id: 1, method, params: {} }, { token: null });
      expect(res.status).toBe(401);
    }
  });
});

describe('revocation', () => {
  test('a revoked identity is refused; a token issued after the cut-off works; other identities are untouched', async () => {
    const old = gw.token({ id: 'revokee', iat: now() - 10 });
    const bystander = gw.token({ id: 'bystander', iat: now() - 10 });
    expect((await gw.post({ jsonrpc: '2.0', id: 1, method: 'ping' }, { token: old })).status).toBe(200);

    await gw.bus.revocations.revoke('revokee', now() - 5);
    const before = gw.events.filter((e) => e.type !== 'token.revoked').length;
    const refused = await gw.post(WRITE, { token: old });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect((await json(refused)).error.message).toMatch(/revoked/);
    expect(gw.events.filter((e) => e.type !== 'token.revoked').length).toBe(before);

    expect((await gw.post({ jsonrpc: '2.0', id: 1, method: 'ping' }, { token: gw.token({ id: 'revokee' }) })).status).toBe(200);
    expect((await gw.post({ jsonrpc: '2.0', id: 1, method: 'ping' }, { token: bystander })).status).toBe(200);
  });
});

const TOOLS_OF: Record<string, string[]> = {
  'file:read': ['read_file', 'read_multiple_files', 'search_text'],
  'file:list': ['list_directory', 'directory_tree', 'search_files', 'get_file_info'],
  'file:write': ['write_file', 'edit_file', 'create_directory', 'move_path', 'delete_path'],
  'system:exec': ['run_command', 'start_process', 'read_process_output', 'write_process_input', 'kill_process', 'list_processes'],
  'network:http': ['http_request'],
};
/** One harmless call per permission, which passes the permission check and the schema. */
const SAMPLE: Record<string, { name: string; arguments: Record<string, unknown> }> = {
  'file:read': { name: 'read_file', arguments: { path: 'absent.txt' } },
  'file:list': { name: 'list_directory', arguments: { path: '.' } },
  'file:write': { name: 'create_directory', arguments: { path: 'made-here' } },
  'system:exec': { name: 'run_command', arguments: { command: 'true' } },
  'network:http': { name: 'http_request', arguments: { url: 'http://127.0.0.1:9/' } },
};

describe('permission matrix', () => {
  test('the matrix covers every permission the token format knows', () => {
    expect(Object.keys(TOOLS_OF).sort()).toEqual([...PERMISSIONS].sort());
  });

  describe.each(Object.keys(TOOLS_OF))('a token with only %s', (permission) => {
    const id = `only-${permission.replace(':', '-')}`;
    const token = () => gw.token({ id, permissions: [permission] });

    test('tools/list shows exactly its tools', async () => {
      const reply = await json(await gw.post({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, { token: token() }));
      expect(reply.result.tools.map((t: { name: string }) => t.name).sort()).toEqual([...TOOLS_OF[permission]!].sort());
    });

    test('its own tool runs', async () => {
      const reply = await json(await gw.post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: SAMPLE[permission] }, { token: token() }));
      expect(reply.error).toBeUndefined();
      expect(reply.result.content).toBeDefined();
    });

    test('every other tool is denied with -32003 naming the missing permission, and nothing runs', async () => {
      for (const [other, tools] of Object.entries(TOOLS_OF)) {
        if (other === permission) continue;
        for (const name of tools) {
          const before = gw.events.length;
          const res = await gw.post(
            { jsonrpc: '2.0', id: name, method: 'tools/call', params: { name, arguments: SAMPLE[other]!.name === name ? SAMPLE[other]!.arguments : {} } },
            { token: token() },
          );
          expect(res.status).toBe(200);
          const reply = await json(res);
          expect(reply.id).toBe(name);
          expect(reply.error).toMatchObject({ code: -32003, data: { tool: name, permission: other } });
          expect(reply.error.message).toContain(other);
          expect(gw.events.length).toBe(before);
        }
      }
    });
  });

  test('an empty permission list sees no tools and may call none', async () => {
    const token = gw.token({ id: 'nobody', permissions: [] });
    const list = await json(await gw.post({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, { token }));
    expect(list.result.tools).toEqual([]);
    const call = await json(await gw.post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: SAMPLE['file:read'] }, { token }));
    expect(call.error.code).toBe(-32003);
  });
});
