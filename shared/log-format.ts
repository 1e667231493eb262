/**
 * Pino's JSON lines made readable for a person at a terminal:
 *   06:40:12.345 INFO  toolgate serve ready  url=http://127.0.0.1:3000/ sandbox=bwrap
 * Machines (files, pipes, log collectors) keep the JSON; this is only chosen for a TTY or on
 * request (TOOLGATE_LOG_FORMAT=pretty). Pino's own fields (time, level, pid, name, msg) become
 * the line's head; every other field follows as key=value; an error's stack follows indented.
 */

const LEVELS: Record<number, [name: string, color: string]> = {
  10: ['TRACE', '90'],
  20: ['DEBUG', '36'],
  30: ['INFO', '32'],
  40: ['WARN', '33'],
  50: ['ERROR', '31'],
  60: ['FATAL', '35'],
};
const HEAD = new Set(['time', 'level', 'pid', 'hostname', 'name', 'msg']);

const value = (v: unknown): string => (typeof v === 'string' && /^[^\s"=]+$/.test(v) ? v : (JSON.stringify(v) ?? String(v)));

function clock(time: unknown): string {
  const d = typeof time === 'number' ? new Date(time) : new Date();
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** One readable line (with an error's stack on the lines after it) for one pino JSON line. */
export function prettyLogLine(json: string, color = false): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const [name, code] = LEVELS[entry.level as number] ?? [String(entry.level).toUpperCase(), '0'];
  const level = color ? `\x1b[${code}m${name.padEnd(5)}\x1b[0m` : name.padEnd(5);
  const fields: string[] = [];
  let stack = '';
  for (const [key, v] of Object.entries(entry)) {
    if (HEAD.has(key)) continue;
    if (key === 'err' && typeof v === 'object' && v !== null) {
      const err = v as { message?: unknown; stack?: unknown };
      fields.push(`err=${value(err.message)}`);
      if (typeof err.stack === 'string') stack = `\n${err.stack.replace(/^/gm, '    ')}`;
      continue;
    }
    fields.push(`${key}=${value(v)}`);
  }
  const msg = typeof entry.msg === 'string' ? entry.msg : '';
  return `${clock(entry.time)} ${level} ${msg}${fields.length ? `  ${fields.join(' ')}` : ''}${stack}\n`;
}

/** A pino destination that writes readable lines to `out` (synchronously: a person is reading). */
export function prettyDestination(out: { write(s: string): unknown }, color: boolean): { write(s: string): void } {
  return {
    write(chunk: string) {
      for (const line of chunk.split('\n')) if (line !== '') out.write(prettyLogLine(line, color));
    },
  };
}
