/**
 * The token-attack set against both HTTP setups: the gateway on the in-process bus and the
 * gateway on the BullMQ bus (with Redis). Every forged, malformed, expired, mistyped or revoked
 * token carries a tools/call `write_file` of a marker file of its own; each must get 401 with
 * `WWW-Authenticate: Bearer` and a -32008 error, and afterwards the marker exists in no tenant's
 * workspace and the bus saw no job. A valid token writing its marker first shows the search
 * would find one. (test/gateway/auth.test.ts checks each refusal's message in detail.)
 */
import { createHmac, generateKeyPairSync, KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { PERMISSIONS } from '../../shared/auth/permissions';
import { ErrorCode } from '../../shared/protocol/errors';
import { describeRedis } from '../helpers/redis';
import { AttackGateway, GatewaySetup, startAttackGateway } from './gateways';
import { tally } from './tally';

const now = () => Math.floor(Date.now() / 1000);
const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const claims = (extra: Record<string, unknown> = {}) => ({ id: 'mallory', permissions: [...PERMISSIONS], iat: now(), exp: now() + 3600, ...extra });
const without = (name: string) => {
  const c: Record<string, unknown> = claims();
  delete c[name];
  return c;
};

/** A compact JWS built by hand: HMAC-signed with `secret` under `hash`, or unsigned (null). */
function forge(header: Record<string, unknown>, payload: Record<string, unknown>, secret: string | null, hash = 'sha256'): string {
  const head = `${b64(header)}.${b64(payload)}`;
  return `${head}.${secret === null ? '' : createHmac(hash, secret).update(head).digest('base64url')}`;
}

let rsaKey: KeyObject | undefined;
const rsa = () => (rsaKey ??= generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey);

interface Attack {
  name: string;
  /** The Authorization header (undefined: none sent). */
  header: (gw: AttackGateway) => string | undefined;
}

const bearer = (token: string) => `Bearer ${token}`;
const hs256 = (gw: AttackGateway, payload: Record<string, unknown>) => bearer(forge({ alg: 'HS256', typ: 'JWT' }, payload, gw.secret));

const attacks: Attack[] = [
  { name: 'no Authorization header', header: () => undefined },
  { name: 'an empty Authorization header', header: () => '' },
  { name: 'the Basic scheme', header: () => `Basic ${Buffer.from('admin:admin').toString('base64')}` },
  { name: 'a valid token without a scheme', header: (gw) => gw.token({ id: 'mallory' }) },
  { name: 'the Token scheme', header: (gw) => `Token ${gw.token({ id: 'mallory' })}` },
  { name: 'Bearer and nothing', header: () => 'Bearer ' },
  { name: 'garbage', header: () => 'Bearer garbage' },
  { name: 'three garbage parts', header: () => 'Bearer a.b.c' },
  { name: 'signed with another secret', header: (gw) => bearer(gw.token({ id: 'mallory' }, 'not-the-secret')) },
  {
    name: 'a tampered payload (permissions widened)',
    header: (gw) => {
      const [h, , s] = gw.token({ id: 'mallory', permissions: ['file:read'] }).split('.');
      return `Bearer ${h}.${b64(claims())}.${s}`;
    },
  },
  { name: 'alg none, unsigned', header: () => bearer(forge({ alg: 'none', typ: 'JWT' }, claims(), null)) },
  { name: 'alg "None" with an HS256 signature', header: (gw) => bearer(forge({ alg: 'None' }, claims(), gw.secret)) },
  { name: 'no alg', header: (gw) => bearer(forge({ typ: 'JWT' }, claims(), gw.secret)) },
  { name: 'HS384 with the right secret', header: (gw) => bearer(jwt.sign(claims(), gw.secret, { algorithm: 'HS384', noTimestamp: true })) },
  { name: 'HS512 with the right secret', header: (gw) => bearer(forge({ alg: 'HS512' }, claims(), gw.secret, 'sha512')) },
  { name: 'RS256 header over an HMAC of the secret (key confusion)', header: (gw) => bearer(forge({ alg: 'RS256' }, claims(), gw.secret)) },
  { name: 'a real RS256 token', header: () => bearer(jwt.sign(claims(), rsa(), { algorithm: 'RS256', noTimestamp: true })) },
  { name: 'an empty signature', header: () => bearer(forge({ alg: 'HS256' }, claims(), null)) },
  { name: 'a crit header', header: (gw) => bearer(forge({ alg: 'HS256', crit: ['exp'] }, claims(), gw.secret)) },
  { name: 'expired', header: (gw) => bearer(gw.token({ id: 'mallory', iat: now() - 7200, exp: now() - 1 })) },
  { name: 'expiring this second', header: (gw) => bearer(gw.token({ id: 'mallory', iat: now() - 60, exp: now() })) },
  { name: 'issued an hour from now', header: (gw) => bearer(gw.token({ id: 'mallory', iat: now() + 3600, exp: now() + 7200 })) },
  ...(['id', 'permissions', 'iat', 'exp'] as const).map((field) => ({ name: `missing ${field}`, header: (gw: AttackGateway) => hs256(gw, without(field)) })),
  { name: 'id a number', header: (gw) => hs256(gw, claims({ id: 42 })) },
  { name: 'id empty', header: (gw) => hs256(gw, claims({ id: '' })) },
  { name: 'permissions a string', header: (gw) => hs256(gw, claims({ permissions: 'file:write' })) },
  { name: 'permissions holding a number', header: (gw) => hs256(gw, claims({ permissions: [1] })) },
  { name: 'iat a string', header: (gw) => hs256(gw, claims({ iat: String(now()) })) },
  { name: 'exp fractional', header: (gw) => hs256(gw, claims({ exp: now() + 3600.5 })) },
  { name: 'an unknown permission', header: (gw) => hs256(gw, claims({ permissions: ['file:write', 'root'] })) },
  { name: 'an extra claim', header: (gw) => hs256(gw, claims({ admin: true })) },
  { name: 'a token over the size limit', header: (gw) => hs256(gw, claims({ id: 'x'.repeat(9000) })) },
];

let markers = 0;
const write = (marker: string) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'write_file', arguments: { path: marker, content: 'pwned' } },
});

async function post(gw: AttackGateway, header: string | undefined, body: unknown): Promise<{ status: number; challenge: string; reply: any }> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (header !== undefined) headers.Authorization = header;
  const res = await fetch(gw.url, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, challenge: res.headers.get('www-authenticate') ?? '', reply: await res.json() };
}

/** Sends one attack's write and checks it was refused and wrote nothing; counts it. */
async function expectRefused(gw: AttackGateway, set: string, header: string | undefined, says?: RegExp): Promise<void> {
  const marker = `pwned-${process.pid}-${++markers}.txt`;
  const jobsBefore = gw.jobEvents();
  const { status, challenge, reply } = await post(gw, header, write(marker));
  const written = await gw.find(marker);
  const refused = status === 401 && /^Bearer\b/.test(challenge) && reply?.error?.code === ErrorCode.Unauthenticated;
  const leaked = written.length > 0 || gw.jobEvents() > jobsBefore || reply?.result !== undefined;
  tally.probe(set, refused, leaked);
  expect(written).toEqual([]);
  expect(gw.jobEvents()).toBe(jobsBefore);
  expect({ status, challenge, reply }).toMatchObject({
    status: 401,
    challenge: expect.stringMatching(/^Bearer\b/),
    reply: { jsonrpc: '2.0', id: null, error: { code: ErrorCode.Unauthenticated } },
  });
  if (says) expect(reply.error.message).toMatch(says);
}

function tokenAttackSet(setup: GatewaySetup): void {
  const set = `token-attacks[${setup}]`;
  let gw: AttackGateway;
  beforeAll(async () => {
    gw = await startAttackGateway(setup);
  }, 30_000);
  afterAll(async () => {
    await gw?.close();
  });

  test('control: a valid token writes its marker, and the search finds it', async () => {
    const marker = `control-${process.pid}.txt`;
    const { status, reply } = await post(gw, bearer(gw.token({ id: 'control' })), write(marker));
    expect(status).toBe(200);
    expect(reply.result.isError).toBeFalsy();
    expect(await gw.find(marker)).toHaveLength(1);
  });

  test.each(attacks.map((a) => [a.name, a] as const))('%s → 401, nothing written', async (_name, attack) => {
    await expectRefused(gw, set, attack.header(gw));
  });

  test('a revoked identity → 401, nothing written; a token issued after the cut-off works', async () => {
    const old = gw.token({ id: 'revokee', iat: now() - 10 });
    await gw.revoke('revokee', now() - 5);
    await expectRefused(gw, set, bearer(old), /revoked/);
    const fresh = await post(gw, bearer(gw.token({ id: 'revokee' })), { jsonrpc: '2.0', id: 2, method: 'ping' });
    expect(fresh).toMatchObject({ status: 200, reply: { result: {} } });
  });
}

describe('token attacks: gateway on the in-process bus', () => tokenAttackSet('in-process'));

describeRedis('token attacks: gateway on the BullMQ bus', () => tokenAttackSet('bullmq'));
