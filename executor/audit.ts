/**
 * The audit log: one structured line per finished tool call, built from bus events alone
 * (`job.completed` / `job.failed` give the outcome, and the argument shape when they name it;
 * else `job.enqueued` gives the shape):
 *
 *   {"audit":true,"event":"tool.call","jobId":"…","identity":"alice","tool":"read_file",
 *    "outcome":"ok","durationMs":3,"args":{"path":"string(9)"},"traceparent":"00-…-01","msg":"tool call"}
 *
 * `outcome` is `ok`, `tool_error` (the tool ran and reported a failure: `isError`) or `error`
 * (a JSON-RPC error; `code` and `error` name it). `traceparent`/`tracestate` appear when the caller
 * sent them in `_meta` (W3C trace context, validated at the gateway). Never values: argument shapes, not
 * arguments; no file contents, command output, error messages or secrets.
 *
 * Lines go to the logger (stderr) at info level even when TOOLGATE_LOG_LEVEL is warn or error
 * (only `silent` silences them). To keep them in a file, filter on `"audit":true`, e.g.
 * `toolgate executor 2> >(grep --line-buffered '"audit":true' >> audit.log >&2)`, or point a
 * log shipper at stderr.
 */
import type { Bus } from '../shared/bus/bus';
import type { ArgumentShape, BusEvent, EgressClosedEvent, EgressDeniedEvent } from '../shared/bus/events';
import { REDACTED, REDACTED_KEYS, type Logger } from '../shared/log';
import { ErrorCode } from '../shared/protocol/errors';

export interface AuditOptions {
  bus: Pick<Bus, 'subscribe'>;
  log: Logger;
  /**
   * Which finished jobs to write (default: all). Every process on a Redis bus sees every event,
   * so each executor writes the jobs it ran and a call is audited once however many run. Their
   * outcome events name the argument shape (`args`), so with `includes` the shapes of
   * `job.enqueued` are not kept (an outcome without `args` still waits `joinWaitMs` for one).
   */
  includes?: (jobId: string) => boolean;
  /** How long an enqueued job's shape waits for its outcome before it is forgotten (default 15 min). */
  retainMs?: number;
  /** How long an outcome waits for its `job.enqueued` (events from two processes may cross) (default 2 s). */
  joinWaitMs?: number;
}

export interface Audit {
  /** Unsubscribes, writing any line still waiting for its argument shape. */
  stop(): void;
}

type Outcome = Extract<BusEvent, { type: 'job.completed' | 'job.failed' }>;

/** Shapes kept at most (oldest dropped first), whatever the retention: the audit's memory bound. */
const MAX_PENDING = 100_000;
const CODE_NAMES = new Map<number, string>(Object.entries(ErrorCode).map(([name, code]) => [code, name]));

/**
 * The logger's redaction (log.ts) censors REDACTED_KEYS one level down in every line; an audit
 * line's only object member is `args`, so the audit censors there itself, and its logger skips
 * pino's redaction pass (a copy-and-restore walk of every line: ~6 µs of each call's audit line).
 */
function censored(args: ArgumentShape | null): ArgumentShape | null {
  if (args === null) return null;
  let out: ArgumentShape | undefined;
  for (const key of REDACTED_KEYS) if (Object.hasOwn(args, key)) (out ??= { ...args })[key] = REDACTED;
  return out ?? args;
}

export function startAudit(options: AuditOptions): Audit {
  const { bus, includes } = options;
  const retainMs = options.retainMs ?? 15 * 60_000;
  const joinWaitMs = options.joinWaitMs ?? 2_000;
  const parent = options.log;
  const quieterThanInfo = parent.level !== 'silent' && parent.levelVal > parent.levels.values.info!;
  const log = parent.child({ audit: true }, { level: quieterThanInfo ? 'info' : parent.level, redact: [] });
  /** Argument shapes by job id, in arrival order (so the oldest are first to go). */
  const shapes = new Map<string, { args: ArgumentShape; at: number }>();
  /** Outcomes that arrived before their `job.enqueued`. */
  const waiting = new Map<string, { event: Outcome; timer: NodeJS.Timeout }>();

  const write = (event: Outcome, args: ArgumentShape | null) => {
    const line: Record<string, unknown> = { event: 'tool.call', jobId: event.jobId, identity: event.tenant, tool: event.tool };
    if (event.type === 'job.completed') line.outcome = event.isError ? 'tool_error' : 'ok';
    else Object.assign(line, { outcome: 'error', code: event.code, error: CODE_NAMES.get(event.code) ?? 'Unknown' });
    Object.assign(line, { durationMs: event.durationMs, args: censored(args) });
    // The caller's trace context, as the job carried it here: one call can be followed across processes.
    if (event.trace?.traceparent) line.traceparent = event.trace.traceparent;
    if (event.trace?.tracestate) line.tracestate = event.trace.tracestate;
    log.info(line, 'tool call');
  };

  const onEvent = (event: BusEvent) => {
    if (event.type === 'job.enqueued') {
      const held = waiting.get(event.jobId);
      if (held) {
        clearTimeout(held.timer);
        waiting.delete(event.jobId);
        return write(held.event, event.args);
      }
      // An audit that writes only some jobs (an executor on Redis) reads their shapes from their
      // outcomes: keeping every job.enqueued of the cluster would only cost memory.
      if (includes) return;
      shapes.set(event.jobId, { args: event.args, at: Date.now() });
      if (shapes.size > MAX_PENDING) shapes.delete(shapes.keys().next().value!);
      return;
    }
    if (event.type !== 'job.completed' && event.type !== 'job.failed') return;
    const shape = shapes.get(event.jobId);
    shapes.delete(event.jobId);
    if (includes && !includes(event.jobId)) return;
    if (event.args) return write(event, event.args);
    if (shape) return write(event, shape.args);
    const timer = setTimeout(() => {
      waiting.delete(event.jobId);
      write(event, null);
    }, joinWaitMs);
    timer.unref();
    waiting.set(event.jobId, { event, timer });
  };

  const unsubscribe = bus.subscribe(onEvent);
  // Jobs whose outcome never comes (their executor died): forget their shapes after `retainMs`.
  const sweeper = setInterval(
    () => {
      const cutoff = Date.now() - retainMs;
      for (const [id, s] of shapes) {
        if (s.at >= cutoff) break;
        shapes.delete(id);
      }
    },
    Math.min(retainMs, 60_000),
  );
  sweeper.unref();

  return {
    stop() {
      unsubscribe();
      clearInterval(sweeper);
      for (const { event, timer } of waiting.values()) {
        clearTimeout(timer);
        write(event, null);
      }
      waiting.clear();
      shapes.clear();
    },
  };
}

/**
 * Writes one audit line per egress event, for the events of this executor's own proxy (so each
 * connection is audited once, by the executor that carried it, whatever else sees the bus):
 *
 *   {"audit":true,"event":"egress.denied","identity":"alice","host":"example.com","port":443,"reason":"not in this tenant's policy"}
 *   {"audit":true,"event":"egress.closed","identity":"alice","host":"registry.npmjs.org","port":443,"address":"…","bytesIn":5120,"bytesOut":880,"durationMs":212}
 *
 * Host names, addresses and counts only: never URLs, headers or payload.
 */
export function egressAuditor(parent: Logger): (event: EgressDeniedEvent | EgressClosedEvent) => void {
  const quieterThanInfo = parent.level !== 'silent' && parent.levelVal > parent.levels.values.info!;
  const log = parent.child({ audit: true }, { level: quieterThanInfo ? 'info' : parent.level, redact: [] });
  return (event) => {
    const { type, tenant, at: _at, ...rest } = event;
    log.info({ event: type, identity: tenant, ...rest }, type === 'egress.denied' ? 'egress refused' : 'egress connection');
  };
}
