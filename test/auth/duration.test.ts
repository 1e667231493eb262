import { describeDuration, DurationError, MAX_DURATION_SECONDS, parseDuration } from '../../shared/auth/duration';

describe('parseDuration', () => {
  it.each([
    ['30s', 30],
    ['15m', 900],
    ['1h', 3600],
    ['7d', 604_800],
    ['30d', 2_592_000],
    ['2w', 1_209_600],
    ['90m', 5400],
    ['007d', 604_800],
  ])('%s is %i seconds', (text, seconds) => {
    expect(parseDuration(text)).toBe(seconds);
  });

  it.each(['', '0d', '0s', '-1d', '1.5h', '1e3s', '7', 'd', '7D', '7 d', ' 7d', '7d ', '7days', '1h30m', '+7d', '7y', '0x10s', '١d'])(
    'refuses %p with a message naming the accepted form',
    (text) => {
      expect(() => parseDuration(text)).toThrow(DurationError);
      expect(() => parseDuration(text)).toThrow(new RegExp(`"${text.replace(/[.+]/g, '\\$&')}"`));
    },
  );

  it('explains the accepted form', () => {
    expect(() => parseDuration('1.5h')).toThrow(/whole number above 0 followed by s, m, h, d or w/);
    expect(() => parseDuration('0d')).toThrow(/above 0/);
  });

  it('refuses lifetimes beyond a century, and numbers too large to be exact', () => {
    expect(parseDuration(`${MAX_DURATION_SECONDS}s`)).toBe(MAX_DURATION_SECONDS);
    expect(() => parseDuration(`${MAX_DURATION_SECONDS + 1}s`)).toThrow(/100 years/);
    expect(() => parseDuration('99999999999999999999w')).toThrow(DurationError);
  });
});

describe('describeDuration', () => {
  it.each([
    [30, '30 seconds'],
    [60, '1 minute'],
    [5400, '90 minutes'],
    [3600, '1 hour'],
    [2_592_000, '30 days'],
    [604_800, '1 week'],
    [1_209_600, '2 weeks'],
  ])('%i seconds reads "%s"', (seconds, text) => {
    expect(describeDuration(seconds)).toBe(text);
  });
});
