/**
 * Structured logs (pino) to stderr, never stdout: on the stdio transport stdout carries only
 * protocol messages. JSON lines by default, written asynchronously, gathered for up to
 * FLUSH_MS to keep logging off the hot path (call `flush` before exit; pino flushes on 'exit');
 * readable lines for a person at a terminal (log-format.ts).
 * Log call sites pass identities, tool names, sizes and outcomes — never file contents,
 * command output or secrets.
 */
import { writeSync } from 'node:fs';
import pino, { Logger } from 'pino';
import { prettyDestination } from './log-format';

export type { Logger };

export type LogFormat = 'auto' | 'json' | 'pretty';

/** `auto` is `pretty` when stderr is a terminal, else `json`. */
export function resolveLogFormat(format: LogFormat, stderrIsTty = process.stderr.isTTY === true): 'json' | 'pretty' {
  return format === 'auto' ? (stderrIsTty ? 'pretty' : 'json') : format;
}

/** Members censored one level down in every line (`{err: {token: …}}`), and what replaces them. */
export const REDACTED_KEYS: readonly string[] = ['token', 'secret', 'authorization', 'password'];
export const REDACTED = '[redacted]';

export function createLogger(level: string, name = 'toolgate', format: LogFormat = 'json'): Logger {
  const options = {
    name,
    level,
    base: { pid: process.pid },
    redact: { paths: REDACTED_KEYS.map((key) => `*.${key}`), censor: REDACTED },
  };
  if (resolveLogFormat(format) === 'pretty') return pino(options, prettyDestination(process.stderr, process.stderr.isTTY === true));
  return pino(options, gathered(pino.destination({ dest: 2, sync: false }), 2));
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

/**
 * Gathers lines in front of the destination. `flush` hands them to it; `flushSync` (pino's exit
 * hook: the event loop is gone, so nothing asynchronous may start) writes what the destination
 * holds, then the gathered lines, synchronously and in that order.
 */
function gathered(dest: SonicBoom, fd: number): SonicBoom {
  const write = dest.write.bind(dest);
  const flush = dest.flush.bind(dest);
  const flushSync = dest.flushSync.bind(dest);
  let pending = '';
  let timer: NodeJS.Timeout | undefined;
  const take = () => {
    clearTimeout(timer);
    timer = undefined;
    const lines = pending;
    pending = '';
    return lines;
  };
  const out = () => {
    const lines = take();
    if (lines !== '') write(lines);
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
    const lines = take();
    flushSync();
    if (lines !== '') writeAllSync(fd, lines);
  };
  return dest;
}

/** How long an exiting process keeps retrying a full stderr pipe (EAGAIN) before it drops the rest. */
const EXIT_WRITE_PATIENCE_MS = 1000;

function writeAllSync(fd: number, text: string): void {
  let bytes = Buffer.from(text, 'utf8');
  const giveUpAt = Date.now() + EXIT_WRITE_PATIENCE_MS;
  while (bytes.length > 0) {
    try {
      bytes = bytes.subarray(writeSync(fd, bytes));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || Date.now() > giveUpAt) return;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10); // the reader needs a moment
    }
  }
}
