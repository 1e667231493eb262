/**
 * Token lifetimes for `generate-token --expires` (spec §2: "1h, 7d, 30d"): a whole number above
 * zero followed by one unit letter. Nothing else is guessed at ("1.5h", "7 d", "7D", "-1d", "7"
 * are refused) because a mistyped lifetime should stop the generator, not issue a surprise.
 */
export class DurationError extends Error {
  override readonly name = 'DurationError';
}

const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 } as const;
type Unit = keyof typeof UNIT_SECONDS;
const UNIT_NAMES: Record<Unit, string> = { s: 'second', m: 'minute', h: 'hour', d: 'day', w: 'week' };

/** The longest lifetime accepted: beyond a century it is a typo, and exp stays a safe integer. */
export const MAX_DURATION_SECONDS = 100 * 365 * 86_400;

const FORM = /^(\d+)([smhdw])$/;
const HINT = 'use a whole number above 0 followed by s, m, h, d or w (seconds, minutes, hours, days, weeks), e.g. 1h, 7d, 30d';

/** Parses "30s", "15m", "1h", "7d", "2w" into seconds. Throws DurationError otherwise. */
export function parseDuration(text: string): number {
  const match = FORM.exec(text);
  const amount = Number(match?.[1]);
  if (!match || amount <= 0) throw new DurationError(`invalid duration "${text}": ${HINT}`);
  const seconds = amount * UNIT_SECONDS[match[2] as Unit];
  if (!Number.isSafeInteger(seconds) || seconds > MAX_DURATION_SECONDS) {
    throw new DurationError(`invalid duration "${text}": the longest lifetime accepted is 100 years (${MAX_DURATION_SECONDS}s)`);
  }
  return seconds;
}

/** "30 days", "1 hour", "90 minutes": the largest unit that divides the duration exactly. */
export function describeDuration(seconds: number): string {
  const units = (Object.keys(UNIT_SECONDS) as Unit[]).reverse();
  const unit = units.find((u) => seconds % UNIT_SECONDS[u] === 0) ?? 's';
  const amount = seconds / UNIT_SECONDS[unit];
  return `${amount} ${UNIT_NAMES[unit]}${amount === 1 ? '' : 's'}`;
}
