/**
 * Structured logs (pino) to stderr, never stdout: on the stdio transport stdout carries only
 * protocol messages. Asynchronous writes keep logging off the hot path; call `flush` before exit.
 * Log call sites pass identities, tool names, sizes and outcomes — never file contents,
 * command output or secrets.
 */
import pino, { Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, name = 'toolgate'): Logger {
  return pino(
    { name, level, base: { pid: process.pid }, redact: { paths: ['*.token', '*.secret', '*.authorization', '*.password'], censor: '[redacted]' } },
    pino.destination({ dest: 2, sync: false }),
  );
}
