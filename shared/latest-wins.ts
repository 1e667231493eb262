/**
 * Paces a stream of updates where only the newest matters (a running command's output line):
 * the first goes out at once, later ones at most once per `gapMs`, and an update that arrives
 * inside the gap is held until its end, replaced by any newer one. Nothing goes out after stop().
 */
export interface LatestWins<T> {
  push(value: T): void;
  stop(): void;
}

export function latestWins<T>(send: (value: T) => void, gapMs: number): LatestWins<T> {
  let latest: { value: T } | undefined;
  let timer: NodeJS.Timeout | undefined;
  let last = -Infinity;
  let stopped = false;
  const flush = () => {
    timer = undefined;
    last = Date.now();
    if (latest === undefined || stopped) return;
    const { value } = latest;
    latest = undefined;
    send(value);
  };
  return {
    push(value) {
      if (stopped) return;
      latest = { value };
      if (timer) return;
      const wait = last + gapMs - Date.now();
      if (wait <= 0) flush();
      else timer = setTimeout(flush, wait);
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
