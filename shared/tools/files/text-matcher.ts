/**
 * search_text's line matcher. A caller's regular expression can backtrack for minutes
 * (`(a+)+$`), and a running regex cannot be interrupted from outside, so matching runs in a
 * `vm` context whose `timeout` V8 enforces inside the regex engine itself. Literal queries use
 * the same path, escaped, without the timeout (an escaped literal cannot backtrack, and each
 * timed run costs a watchdog thread: ~80 µs per file).
 */
import * as vm from 'node:vm';
import { ToolError } from '../../protocol/errors';

export interface LineMatch {
  line: number;
  /** 1-based, in UTF-16 code units of the line. */
  column: number;
  length: number;
  text: string;
}

/** Runs inside the context: one match per line at most, `max` matches at most. */
const SEARCH = new vm.Script(`(() => {
  const out = [];
  let line = 0;
  let start = 0;
  for (;;) {
    let end = input.indexOf('\\n', start);
    const last = end === -1;
    if (last) end = input.length;
    line++;
    let s = input.slice(start, end);
    if (s.endsWith('\\r')) s = s.slice(0, -1);
    pattern.lastIndex = 0;
    const m = pattern.exec(s);
    if (m) {
      out.push([line, m.index, m[0].length, s]);
      if (out.length >= max) break;
    }
    if (last) break;
    start = end + 1;
  }
  return out;
})()`);

export class SearchTimeout extends Error {}

const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export class TextMatcher {
  private readonly context: vm.Context;
  private readonly timed: boolean;

  constructor(query: string, options: { regex: boolean; caseSensitive: boolean }) {
    this.timed = options.regex;
    this.context = vm.createContext({ input: '', max: 0, pattern: null });
    const source = options.regex ? query : escapeRegex(query);
    try {
      vm.runInContext(`pattern = new RegExp(${JSON.stringify(source)}, ${JSON.stringify(options.caseSensitive ? '' : 'i')})`, this.context, { timeout: 1000 });
    } catch (err) {
      throw new ToolError(`Invalid regular expression: ${(err as { message?: string }).message ?? String(err)}`);
    }
  }

  /** Matches in `text`, at most `max`; throws SearchTimeout after `timeoutMs`. */
  match(text: string, max: number, timeoutMs: number): LineMatch[] {
    this.context.input = text;
    this.context.max = max;
    let raw: Array<[number, number, number, string]>;
    try {
      const timeout = this.timed ? { timeout: Math.max(1, Math.floor(timeoutMs)) } : {};
      raw = SEARCH.runInContext(this.context, timeout) as typeof raw;
    } catch (err) {
      if ((err as { code?: string }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') throw new SearchTimeout();
      throw err;
    } finally {
      this.context.input = '';
    }
    return Array.from(raw, ([line, index, length, s]) => ({ line, column: index + 1, length, text: s }));
  }
}
