/**
 * Structured logs (pino) to stderr, never stdout: on the stdio transport stdout carries only
 * protocol messages. JSON lines by default, written asynchronously, gathered for up to
 * FLUSH_MS to keep logging off the hot path (call `flush` before exit; pino flushes on 'exit');
 * readable lines for a person at a terminal (log-format.ts).
 * Log call sites pass identities, tool names, sizes and outcomes — never file contents,
 * command output or secrets.
 */
import pino, { Logger } from 'pino';
import { prettyDestination } from './log-format';

export type { Logger };

export type LogFormat = 'auto' | 'json' | 'pretty';

/** `auto` is `pretty` when stderr is a terminal, else `json`. */
export function resolveLogFormat(format: LogFormat, stderrIsTty = process.stderr.isTTY === true): 'json' | 'pretty' {
  return format === 'auto' ? (stderrIsTty ? 'pretty' : 'json') : format;
}

export function createLogger(level: string, name = 'toolgate', format: LogFormat = 'json'): Logger {
  const options = {
    name,
    level,
    base: { pid: process.pid },
    redact: { paths: ['*.token', '*.secret', '*.authorization', '*.password'], censor: '[redacted]' },
  };
  if (resolveLogFormat(format) === 'pretty') return pino(options, prettyDestination(process.stderr, process.stderr.isTTY === true));
  return pino(options, gathered(pino.destination({ dest: 2, sync: false })));
}

/**
 * How long a JSON line may wait to be written with the ones after it, and how many characters
 * are gathered before a write regardless. A write per line (an audit line per tool call) costs a
 * thread-pool hop and wakes whoever reads stderr, per call: measured, ~6 % of an embedded
 * `read_file`'s CPU. A line is late by at most FLUSH_MS, and a quiet server writes nothing.
 */
const FLUSH_MS = 50;
const GATHER_CHARS = 16 * 1024;

type SonicBoom = ReturnType<typeof pino.destination>;

/** Gathers lines in front of the destination; flush and flushSync (pino's exit hook) write them first. */
function gathered(dest: SonicBoom): SonicBoom {
  const write = dest.write.bind(dest);
  const flush = dest.flush.bind(dest);
  const flushSync = dest.flushSync.bind(dest);
  let pending = '';
  let timer: NodeJS.Timeout | undefined;
  const out = () => {
    clearTimeout(timer);
    timer = undefined;
    if (pending === '') return;
    const lines = pending;
    pending = '';
    write(lines);
  };
  dest.write = (line: string): boolean => {
    pending += line;
    if (pending.length >= GATHER_CHARS) out();
    else timer ??= setTimeout(out, FLUSH_MS).unref();
    return true;
  };
  dest.flush = (cb?: (err?: Error) => unknown) => {
    out();
    flush(cb);
  };
  dest.flushSync = () => {
    out();
    flushSync();
  };
  return dest;
}
