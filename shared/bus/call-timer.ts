/**
 * The one owner of a call's deadline on the gateway side, and of the bus's other checks on the
 * call (its start-by check, its enqueue timeout), on one Node timer armed for the earliest
 * instead of a timer each: every call arms them and nearly every call clears them all unfired.
 *
 * The call passes through phases that end differently at the deadline (waiting for its tenant's
 * admission, then waiting on the bus): each phase says how with `endWith`, on the same timer.
 * Whoever made the timer hands it on with the call; the bus stops it when the call settles.
 */

/** setTimeout's longest wait (a longer one fires at once): a deadline further out is cut to ~24.8 days. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

interface Due {
  at: number;
  fn: () => void;
}

export class CallTimer {
  private readonly due: Due[];
  private ending: () => void;
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Infinity;
  private stopped = false;
  private expired = false;

  /**
   * Armed once, for the earliest of the deadline and `checks` (a timer armed and re-armed at once
   * costs a second timer, and one armed and cleared can empty Node's list for its duration, which
   * the next call then rebuilds).
   */
  constructor(
    readonly deadline: number,
    ending: () => void,
    ...checks: Due[]
  ) {
    this.ending = ending;
    // The deadline first: a check due at the same time finds the call ended already.
    checks.unshift({ at: deadline, fn: () => this.expire() });
    this.due = checks;
    this.arm(earliest(checks));
  }

  /** From now on the deadline ends the call with `fn` (at once if it has passed already). */
  endWith(fn: () => void): void {
    this.ending = fn;
    if (this.expired) this.at(this.deadline, fn);
  }

  /** Runs `fn` at epoch ms `at` (at once if past) unless stopped first. */
  at(at: number, fn: () => void): void {
    if (this.stopped) return;
    this.due.push({ at, fn });
    if (at < this.armedFor) this.arm(at);
  }

  stop(): void {
    this.stopped = true;
    this.due.length = 0;
    clearTimeout(this.timer);
  }

  private expire(): void {
    this.expired = true;
    this.ending();
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(() => this.fire(), Math.min(MAX_TIMER_MS, Math.max(0, at - Date.now())));
  }

  private fire(): void {
    this.armedFor = Infinity;
    const now = Date.now();
    // A timer may fire a little early by Date.now(): what is due within a millisecond runs now.
    const ready = this.due.filter((d) => d.at <= now + 1);
    for (const d of ready) this.due.splice(this.due.indexOf(d), 1);
    for (const d of ready) if (!this.stopped) d.fn();
    if (this.stopped || this.due.length === 0) return;
    this.arm(earliest(this.due));
  }
}

function earliest(due: readonly Due[]): number {
  let at = Infinity;
  for (const d of due) if (d.at < at) at = d.at;
  return at;
}
