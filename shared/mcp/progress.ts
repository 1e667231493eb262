/**
 * `notifications/progress` for one request that asked for it (`_meta.progressToken`), at the
 * edge a client talks to: one notification every `intervalMs` while the call runs, `progress`
 * growing by one each time, `message` the newest line the tool reported (or how long it has run).
 * A client that resets its timeout on progress (the TypeScript SDK) keeps waiting, and an HTTP
 * client reading an event stream sees bytes before its read timeout. (Inside the sandbox the agent
 * relays each new line instead, coalesced: executor/agent/protocol.ts.) Nothing is sent after
 * `stop()`: a request's notifications never follow its response.
 */

export interface ProgressPace {
  intervalMs: number;
}

export type Notify = (method: string, params: Record<string, unknown>) => void;

export interface ProgressReporter {
  /** The tool's newest line. */
  update(message: string): void;
  stop(): void;
}

export function startProgress(notify: Notify, token: string | number, pace: ProgressPace, label: string): ProgressReporter {
  const started = Date.now();
  let progress = 0;
  let latest: string | undefined;
  let stopped = false;
  const send = (message: string) => {
    if (stopped) return;
    progress += 1;
    notify('notifications/progress', { progressToken: token, progress, message });
  };

  const timer = setInterval(() => send(latest ?? `${label} running (${Math.round((Date.now() - started) / 1000)} s)`), pace.intervalMs);
  return {
    update: (message) => void (latest = message),
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}

/** A progress token is a string or a number (MCP); anything else means "no progress asked". */
export function progressTokenOf(meta: Record<string, unknown> | undefined): string | number | undefined {
  const token = meta?.progressToken;
  return typeof token === 'string' || (typeof token === 'number' && Number.isFinite(token)) ? token : undefined;
}
