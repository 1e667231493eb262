/**
 * Structured logs (pino) to stderr, never stdout: on the stdio transport stdout carries only
 * protocol messages. JSON lines by default, written asynchronously to keep logging off the hot
 * path (call `flush` before exit); readable lines for a person at a terminal (log-format.ts).
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
  return pino(options, pino.destination({ dest: 2, sync: false }));
}
