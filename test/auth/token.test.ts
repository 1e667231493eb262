import { createHmac, generateKeyPairSync } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { PERMISSIONS } from '../../shared/auth/permissions';
import { MAX_CLOCK_SKEW_SECONDS, MAX_TOKEN_LENGTH, signToken, verifyToken } from '../../shared/auth/token';
import {
  TokenAlgorithmRejected,
  TokenClaimsInvalid,
  TokenError,
  TokenExpired,
  TokenInvalidSignature,
  TokenMalformed,
  TokenMissing,
  TokenRevoked,
} from '../../shared/auth/token-errors';

const SECRET = 'test-secret-0123456789abcdefghijklmnopqrstuvwxyz';
const IAT = 1_800_000_000;
const EXP = IAT + 3600;
const NOW = IAT + 10;
const valid = () => signToken({ id: 'alice', permissions: ['file:read', 'network:http'], iat: IAT, exp: EXP }, SECRET);

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
/** A token signed by hand with any header and payload, HMAC-SHA256 over the exact segments. */
function forge(header: unknown, payload: unknown, secret = SECRET): string {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
}
const claims = (over: Record<string, unknown> = {}) => ({ id: 'alice', permissions: ['file:read'], iat: IAT, exp: EXP, ...over });
const HS = { alg: 'HS256', typ: 'JWT' };

/** Expects a refusal of the given kind whose message does not echo the token or its parts. */
function expectRefused(token: string | undefined, kind: new (...a: never[]) => TokenError, options = {}, secret = SECRET) {
  let caught: unknown;
  try {
    verifyToken(token, secret, { nowSeconds: NOW, ...options });
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(kind);
  expect(caught).toBeInstanceOf(TokenError);
  const message = (caught as Error).message;
  expect(message.length).toBeGreaterThan(0);
  for (const part of (token ?? '').split('.').filter((p) => p.length > 8)) expect(message).not.toContain(part);
  return message;
}

describe('signToken', () => {
  it('signs HS256 with exactly the fields id, permissions, iat, exp', () => {
    const token = valid();
    const decoded = jwt.verify(token, SECRET, { algorithms: ['HS256'], clockTimestamp: NOW, complete: true });
    expect(decoded.header).toEqual({ alg: 'HS256', typ: 'JWT' });
    expect(Object.keys(decoded.payload as object)).toEqual(['id', 'permissions', 'iat', 'exp']);
    expect(decoded.payload).toEqual({ id: 'alice', permissions: ['file:read', 'network:http'], iat: IAT, exp: EXP });
  });

  it('copies nothing else from its input into the payload', () => {
    const input = { id: 'a', permissions: ['file:read'], iat: IAT, exp: EXP, nbf: IAT, jti: 'x' };
    const payload = jwt.decode(signToken(input, SECRET)) as Record<string, unknown>;
    expect(Object.keys(payload)).toEqual(['id', 'permissions', 'iat', 'exp']);
  });

  it('refuses input that would make an unusable token', () => {
    expect(() => signToken({ id: '', permissions: [], iat: IAT, exp: EXP }, SECRET)).toThrow(/id/);
    expect(() => signToken({ id: 'a', permissions: [1 as unknown as string], iat: IAT, exp: EXP }, SECRET)).toThrow(/permissions/);
    expect(() => signToken({ id: 'a', permissions: [], iat: 1.5, exp: EXP }, SECRET)).toThrow(/iat/);
    expect(() => signToken({ id: 'a', permissions: [], iat: 0, exp: EXP }, SECRET)).toThrow(/iat/);
    expect(() => signToken({ id: 'a', permissions: [], iat: IAT, exp: IAT }, SECRET)).toThrow(/exp/);
    expect(() => signToken({ id: 'a', permissions: [], iat: IAT, exp: EXP }, '')).toThrow(/secret/);
    expect(() => signToken({ id: 'a\ud800', permissions: [], iat: IAT, exp: EXP }, SECRET)).toThrow(/well-formed Unicode/);
  });
});

describe('verifyToken accepts', () => {
  it('a token from signToken, returning frozen claims', () => {
    const result = verifyToken(valid(), SECRET, { nowSeconds: NOW });
    expect(result).toEqual({ id: 'alice', permissions: ['file:read', 'network:http'], iat: IAT, exp: EXP });
    expect(Object.isFrozen(result)).toBe(true);
    expect(Object.isFrozen(result.permissions)).toBe(true);
  });

  it('a token made by jsonwebtoken directly, and every known permission', () => {
    const token = jwt.sign(claims({ permissions: [...PERMISSIONS] }), SECRET, { algorithm: 'HS256' });
    expect(verifyToken(token, SECRET, { nowSeconds: NOW }).permissions).toEqual(PERMISSIONS);
  });

  it('an empty permission list, and collapses duplicates', () => {
    expect(verifyToken(forge(HS, claims({ permissions: [] })), SECRET, { nowSeconds: NOW }).permissions).toEqual([]);
    const dup = forge(HS, claims({ permissions: ['file:read', 'file:read'] }));
    expect(verifyToken(dup, SECRET, { nowSeconds: NOW }).permissions).toEqual(['file:read']);
  });

  it('the current time by default', () => {
    const iat = Math.floor(Date.now() / 1000);
    const token = signToken({ id: 'a', permissions: [], iat, exp: iat + 60 }, SECRET);
    expect(verifyToken(token, SECRET).id).toBe('a');
  });
});

describe('verifyToken refuses', () => {
  it('a missing token', () => {
    expectRefused(undefined, TokenMissing);
    expectRefused('', TokenMissing);
  });

  it('malformed tokens', () => {
    const [h, p, s] = valid().split('.') as [string, string, string];
    expectRefused(`${h}.${p}`, TokenMalformed);
    expectRefused(`${h}.${p}.${s}.${s}`, TokenMalformed);
    expectRefused(`${h}.${p}!.${s}`, TokenMalformed);
    expectRefused(`.${p}.${s}`, TokenMalformed);
    expectRefused(`${Buffer.from('{not json').toString('base64url')}.${p}.${s}`, TokenMalformed);
    expectRefused(forge(HS, ['id']), TokenMalformed);
    expectRefused(forge(['HS256'], claims()), TokenMalformed);
    expectRefused(`${h}.${p}.${'A'.repeat(MAX_TOKEN_LENGTH)}`, TokenMalformed);
  });

  it('alg none, in any spelling, signed or not', () => {
    const unsigned = jwt.sign(claims(), null as unknown as string, { algorithm: 'none' });
    expect(unsigned.endsWith('.')).toBe(true);
    expectRefused(unsigned, TokenAlgorithmRejected);
    for (const alg of ['none', 'None', 'NONE', 'nOnE']) {
      expectRefused(`${b64({ alg })}.${b64(claims())}.`, TokenAlgorithmRejected);
      expectRefused(forge({ alg }, claims()), TokenAlgorithmRejected);
    }
    expectRefused(forge({ typ: 'JWT' }, claims()), TokenAlgorithmRejected);
  });

  it('other HMAC strengths and asymmetric algorithms (no RS/HS confusion)', () => {
    expectRefused(jwt.sign(claims(), SECRET, { algorithm: 'HS384' }), TokenAlgorithmRejected);
    expectRefused(jwt.sign(claims(), SECRET, { algorithm: 'HS512' }), TokenAlgorithmRejected);
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const publicPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const rs = jwt.sign(claims(), privateKey, { algorithm: 'RS256' });
    expectRefused(rs, TokenAlgorithmRejected);
    // Even when the verifier's secret happens to be a public key, RS256 is not accepted.
    expectRefused(rs, TokenAlgorithmRejected, {}, publicPem);
    // The classic confusion: HS256 signed with a public key as the HMAC secret.
    expectRefused(forge(HS, claims(), publicPem), TokenInvalidSignature);
    expectRefused(forge({ alg: 'HS256', crit: ['exp'] }, claims()), TokenAlgorithmRejected);
  });

  it('a wrong secret, a tampered payload, a missing or re-spelled signature', () => {
    const token = valid();
    const [h, p, s] = token.split('.') as [string, string, string];
    expectRefused(token, TokenInvalidSignature, {}, 'another-secret');
    expectRefused(`${h}.${b64(claims({ id: 'mallory' }))}.${s}`, TokenInvalidSignature);
    expectRefused(`${h}.${p}.`, TokenInvalidSignature);
    // 43 base64url characters carry 258 bits for 256: flip the 2 unused bits of the last one.
    const last = s[s.length - 1]!;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const twin = alphabet[alphabet.indexOf(last) ^ 1]!;
    const respelled = s.slice(0, -1) + twin;
    expect(Buffer.from(respelled, 'base64url')).toEqual(Buffer.from(s, 'base64url'));
    expectRefused(`${h}.${p}.${respelled}`, TokenInvalidSignature);
  });

  it.each([
    ['id missing', { id: undefined }],
    ['permissions missing', { permissions: undefined }],
    ['iat missing', { iat: undefined }],
    ['exp missing', { exp: undefined }],
    ['an extra claim (nbf)', { nbf: IAT }],
    ['an extra claim (jti)', { jti: 'x' }],
    ['an empty id', { id: '' }],
    ['a numeric id', { id: 7 }],
    ['permissions as a string', { permissions: 'file:read' }],
    ['an unknown permission', { permissions: ['file:read', 'file:delete'] }],
    ['a non-string permission', { permissions: [1] }],
    ['a fractional iat', { iat: IAT + 0.5 }],
    ['a string iat', { iat: String(IAT) }],
    ['a negative iat', { iat: -1 }],
    ['a string exp', { exp: String(EXP) }],
    ['exp not after iat', { exp: IAT }],
    ['iat in the future', { iat: NOW + MAX_CLOCK_SKEW_SECONDS + 1, exp: EXP + 10_000 }],
  ])('claims with %s', (_label, over) => {
    const payload: Record<string, unknown> = claims(over);
    for (const key of Object.keys(payload)) if (payload[key] === undefined) delete payload[key];
    expectRefused(forge(HS, payload), TokenClaimsInvalid);
  });

  it('names an unknown permission of a correctly signed token, JSON-quoted and capped', () => {
    const message = expectRefused(forge(HS, claims({ permissions: ['file:read', 'file:delete'] })), TokenClaimsInvalid);
    expect(message).toContain('"permissions[1]" is "file:delete", not a known permission');
    expect(message).toContain(PERMISSIONS.join(', '));
    const odd = expectRefused(forge(HS, claims({ permissions: ['a\nb' + 'x'.repeat(200)] })), TokenClaimsInvalid);
    expect(odd).toContain('"a\\nb'); // a control character stays visible, escaped
    expect(odd).not.toContain('x'.repeat(65));
  });

  it('echoes no claim value of a token whose signature does not verify', () => {
    const message = expectRefused(forge(HS, claims({ permissions: ['<script>evil'] }), 'another-secret'), TokenInvalidSignature);
    expect(message).not.toContain('evil');
  });

  it.each([
    ['a lone high surrogate', 'alice\ud800'],
    ['a lone low surrogate', '\udc00bob'],
    ['reversed pair', '\udc00\ud800'],
  ])('an id holding %s (sent as a JSON escape) is refused by name', (_label, id) => {
    // jsonwebtoken encodes the lone surrogate as a JSON escape, exactly what an attacker would send.
    const token = jwt.sign({ id, permissions: ['file:read'], iat: IAT, exp: EXP }, SECRET, { algorithm: 'HS256' });
    expect(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')).toMatch(/\\ud[89abcdef][0-9a-f]{2}/);
    expect(expectRefused(token, TokenClaimsInvalid)).toMatch(/"id" is not well-formed Unicode/);
  });

  it('an id with a proper surrogate pair (an emoji) is accepted', () => {
    const token = jwt.sign({ id: 'ali\u{1F600}ce', permissions: ['file:read'], iat: IAT, exp: EXP }, SECRET, { algorithm: 'HS256' });
    expect(verifyToken(token, SECRET, { nowSeconds: NOW }).id).toBe('ali\u{1F600}ce');
  });

  it('an expired token, at and after exp', () => {
    expect(verifyToken(valid(), SECRET, { nowSeconds: EXP - 1 }).id).toBe('alice');
    expectRefused(valid(), TokenExpired, { nowSeconds: EXP });
    expectRefused(valid(), TokenExpired, { nowSeconds: EXP + 86_400 });
    const real = jwt.sign({ id: 'a', permissions: [], iat: 1_000_000, exp: 1_000_060 }, SECRET, { algorithm: 'HS256' });
    expect(() => verifyToken(real, SECRET)).toThrow(TokenExpired);
  });

  it('a token issued before its id was revoked', () => {
    const seen: string[] = [];
    const notBefore = (id: string) => {
      seen.push(id);
      return id === 'alice' ? IAT + 1 : undefined;
    };
    expectRefused(valid(), TokenRevoked, { notBefore });
    expect(seen).toEqual(['alice']);
    expect(verifyToken(valid(), SECRET, { nowSeconds: NOW, notBefore: () => IAT }).id).toBe('alice');
    expect(verifyToken(valid(), SECRET, { nowSeconds: NOW, notBefore: () => undefined }).id).toBe('alice');
    const bob = forge(HS, claims({ id: 'bob' }));
    expect(verifyToken(bob, SECRET, { nowSeconds: NOW, notBefore }).id).toBe('bob');
  });

  it('to run without a secret', () => {
    expect(() => verifyToken(valid(), '')).toThrow(TypeError);
  });
});
