/**
 * The pure parts: binding placeholders (as written, inside Basic credentials, percent-encoded
 * there), templates, refusals, and redaction of every form of a value, in one buffer and in a
 * stream cut at every possible place.
 */
import { RedactStream } from '../../executor/secrets/rewrite';
import { hostMatcher } from '../../executor/secrets/store';
import { placeholderEnv } from '../../shared/secrets/placeholder';
import { OpenSecret, SecretSet } from '../../shared/secrets/secret-set';

const VALUE = 's3cr3t-VALUE-0123456789';
const secret = (name: string, host: string, extra: Partial<OpenSecret> = {}): OpenSecret => ({
  name,
  hostText: host,
  matches: hostMatcher(host),
  value: VALUE + name,
  ...extra,
});
const set = new SecretSet('alice', [secret('TOKEN', 'api.test'), secret('KEY', '*.other.test', { header: { name: 'X-Key', template: 'k {value}' } })]);

const basic = (text: string) => `Basic ${Buffer.from(text).toString('base64')}`;
const unbasic = (text: string) => Buffer.from(text.replace(/^Basic /, ''), 'base64').toString();

it('swaps placeholders for a matching host and leaves the rest as written, with the reason', () => {
  const bound = set.bind(['Authorization', 'Bearer {{secret:TOKEN}}', 'X-Other', '{{secret:KEY}} {{secret:NOPE}}'], 'api.test', 443);
  expect(bound.headers).toEqual(['Authorization', `Bearer ${VALUE}TOKEN`, 'X-Other', '{{secret:KEY}} {{secret:NOPE}}']);
  expect(bound.used).toEqual(['TOKEN']);
  expect(bound.refused.map((r) => r.reason)).toEqual([
    '{{secret:KEY}} may only be sent to *.other.test, not to api.test:443',
    '{{secret:NOPE}}: this identity has no secret named NOPE',
  ]);
  expect(set.bind(['A', '{{secret:TOKEN}}'], 'api.test', 8080).headers).toEqual(['A', '{{secret:TOKEN}}']);
});

it('swaps inside Basic credentials, as written or percent-encoded', () => {
  expect(unbasic(set.bind(['Authorization', basic('u:{{secret:TOKEN}}')], 'api.test', 443).headers[1]!)).toBe(`u:${VALUE}TOKEN`);
  expect(unbasic(set.bind(['authorization', basic('u:%7B%7Bsecret%3ATOKEN%7D%7D')], 'api.test', 443).headers[1]!)).toBe(`u:${VALUE}TOKEN`);
  expect(set.bind(['Authorization', basic('u:{{secret:TOKEN}}')], 'evil.test', 443).headers[1]).toBe(basic('u:{{secret:TOKEN}}'));
});

it('adds a template only for its hosts and only when the request lacks the header', () => {
  expect(set.bind([], 'a.other.test', 443)).toMatchObject({ headers: ['X-Key', `k ${VALUE}KEY`], used: ['KEY'] });
  expect(set.bind(['x-key', 'mine'], 'a.other.test', 443)).toMatchObject({ headers: ['x-key', 'mine'], used: [] });
  expect(set.bind([], 'other.test', 443).headers).toEqual([]);
});

it('redacts the value, its base64 and its URL-encoded forms', () => {
  const v = `${VALUE}TOKEN`;
  const text = `a ${v} b ${Buffer.from(v).toString('base64').replace(/=+$/, '')} c`;
  expect(set.redactText(text)).toBe('a [secret:TOKEN] b [secret:TOKEN] c');
  expect(set.redactBytes(Buffer.from(`\u0000${v}\u00ff`, 'latin1')).toString('latin1')).toBe('\u0000[secret:TOKEN]\u00ff');
});

it('a stream redacts values cut across chunks at every position', async () => {
  const v = `${VALUE}KEY`;
  const body = Buffer.from(`head ${v} middle ${v}${v} tail`);
  for (let cut = 1; cut < body.length; cut += 1) {
    const stream = new RedactStream(set, set.valueForms);
    const out: Buffer[] = [];
    stream.on('data', (c: Buffer) => out.push(c));
    const done = new Promise((r) => stream.on('end', r));
    stream.write(body.subarray(0, cut));
    stream.write(body.subarray(cut, cut + 3));
    stream.end(body.subarray(cut + 3));
    await done;
    expect(Buffer.concat(out).toString()).toBe('head [secret:KEY] middle [secret:KEY][secret:KEY] tail');
  }
});

it('gives each name to commands as its own placeholder, skipping what is not a name', () => {
  expect(placeholderEnv(['A_B', 'bad-name'])).toEqual({ A_B: '{{secret:A_B}}' });
});
