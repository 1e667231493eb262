/**
 * The DNS-rebinding guard on its own (gateway/origin-guard.ts): which Origin and Host values pass
 * for a gateway bound to loopback and for one bound elsewhere. The same rules end to end, on both
 * protocol eras, are in http-modern.test.ts.
 */
import type { Context, Next } from 'koa';
import { HttpProblem } from '../../gateway/errors';
import { isLoopbackOrigin, originGuard, OriginPolicy } from '../../gateway/origin-guard';

const LOOPBACK_ORIGINS = [
  'http://localhost:3000',
  'http://127.0.0.1:3000',
  'http://[::1]:3000',
  'https://localhost',
  'http://LOCALHOST:5173',
  'http://127.0.0.2:8080',
];
const FOREIGN_ORIGINS = [
  'https://evil.example',
  'http://localhost.evil.example:3000',
  'http://127.0.0.1.nip.io',
  'null',
  'file://',
  'ftp://localhost',
  'not a url',
];

/** Runs the guard for one request; resolves with the refusal, or undefined when it was let through. */
async function check(policy: Partial<OriginPolicy>, headers: Record<string, string>): Promise<HttpProblem | undefined> {
  const guard = originGuard({ allowedOrigins: [], allowedHosts: [], listenHost: '127.0.0.1', ...policy });
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  const ctx = { get: (name: string) => lower[name.toLowerCase()] ?? '' } as unknown as Context;
  let passed = false;
  try {
    await guard(ctx, (async () => {
      passed = true;
    }) as Next);
  } catch (err) {
    expect(err).toBeInstanceOf(HttpProblem);
    return err as HttpProblem;
  }
  expect(passed).toBe(true);
  return undefined;
}

describe('a gateway bound to loopback (the default)', () => {
  test.each(LOOPBACK_ORIGINS)('accepts the loopback Origin %s with no allow-list', async (origin) => {
    for (const listenHost of ['127.0.0.1', '::1', 'localhost']) {
      expect(await check({ listenHost }, { Origin: origin, Host: 'localhost:3000' })).toBeUndefined();
    }
  });

  test.each(FOREIGN_ORIGINS)('refuses the Origin %s: 403 naming TOOLGATE_ALLOWED_ORIGINS', async (origin) => {
    const refusal = await check({}, { Origin: origin, Host: '127.0.0.1:3000' });
    expect(refusal?.status).toBe(403);
    expect(refusal?.message).toMatch(/TOOLGATE_ALLOWED_ORIGINS/);
  });

  test('a loopback Origin does not excuse a foreign Host (a rebound name)', async () => {
    const refusal = await check({}, { Origin: 'http://localhost:3000', Host: 'attacker.example:3000' });
    expect(refusal?.status).toBe(403);
    expect(refusal?.message).toMatch(/TOOLGATE_ALLOWED_HOSTS/);
  });
});

describe('a gateway bound to another address', () => {
  test.each(['0.0.0.0', '10.1.2.3', '::'])('on %s, a loopback Origin is refused unless listed', async (listenHost) => {
    expect((await check({ listenHost }, { Origin: 'http://localhost:3000', Host: 'gw.example' }))?.status).toBe(403);
    expect(await check({ listenHost, allowedOrigins: ['http://localhost:3000'] }, { Origin: 'http://localhost:3000', Host: 'gw.example' })).toBeUndefined();
  });

  test('no Origin at all (every non-browser client) passes', async () => {
    expect(await check({ listenHost: '0.0.0.0' }, { Host: 'gw.example' })).toBeUndefined();
  });
});

test('isLoopbackOrigin: http(s) on a loopback name or address only', () => {
  for (const origin of LOOPBACK_ORIGINS) expect(isLoopbackOrigin(origin)).toBe(true);
  for (const origin of FOREIGN_ORIGINS) expect(isLoopbackOrigin(origin)).toBe(false);
});
