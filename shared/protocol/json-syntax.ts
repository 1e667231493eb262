/**
 * Where a text stops being JSON, for the -32700 message: V8's own messages give a position for
 * some mistakes and not for others (`Unexpected token 'x', "…" is not valid JSON` quotes the
 * input instead). Runs only after JSON.parse has failed, so it may be simple rather than fast;
 * iterative (an explicit stack), so hostile nesting cannot exhaust the call stack.
 */

export interface JsonSyntaxProblem {
  /** 0-based index into the text (UTF-16 code units, as JavaScript counts). */
  offset: number;
  /** 1-based line and column of `offset`. */
  line: number;
  column: number;
  reason: string;
}

const ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);

type Expect = 'value' | 'valueOrClose' | 'keyOrClose' | 'key' | 'colon' | 'after';

/** The first syntax error in `text`, or undefined when it is valid JSON. */
export function findJsonSyntaxError(text: string): JsonSyntaxProblem | undefined {
  const n = text.length;
  const closers: Array<'}' | ']'> = [];
  let i = 0;
  let expect: Expect = 'value';
  const fail = (offset: number, reason: string): JsonSyntaxProblem => {
    let line = 1;
    let lineStart = 0;
    for (let k = 0; k < offset; k++) {
      if (text.charCodeAt(k) === 10) {
        line++;
        lineStart = k + 1;
      }
    }
    return { offset, line, column: offset - lineStart + 1, reason };
  };
  const shown = (at: number) => JSON.stringify(text[at]);

  /** Past the string starting at `at` (a '"'), or a problem. */
  const scanString = (at: number): number | JsonSyntaxProblem => {
    for (let j = at + 1; j < n; j++) {
      const c = text.charCodeAt(j);
      if (c === 34) return j + 1;
      if (c < 0x20) return fail(j, 'a control character inside a string (escape it, e.g. \\n)');
      if (c === 92) {
        const e = text[j + 1];
        if (e === 'u') {
          for (let h = j + 2; h < j + 6; h++) {
            if (h >= n) return fail(n, 'the input ends inside a string');
            if (!/[0-9a-fA-F]/.test(text[h]!)) return fail(h, 'a \\u escape needs four hex digits');
          }
          j += 5;
        } else if (e === undefined) return fail(n, 'the input ends inside a string');
        else if (ESCAPES.has(e)) j++;
        else return fail(j + 1, 'an invalid escape in a string');
      }
    }
    return fail(n, 'the input ends inside a string');
  };

  const isDigit = (at: number) => at < n && text.charCodeAt(at) >= 48 && text.charCodeAt(at) <= 57;
  /** Past the number starting at `at`, or a problem at the first character that breaks it. */
  const scanNumber = (at: number): number | JsonSyntaxProblem => {
    let j = at;
    if (text[j] === '-') j++;
    const digits = (what: string): JsonSyntaxProblem | undefined => {
      if (!isDigit(j)) return j >= n ? fail(n, 'the input ends inside a number') : fail(j, `expected a digit ${what}, found ${shown(j)}`);
      while (isDigit(j)) j++;
      return undefined;
    };
    if (text[j] === '0') j++;
    else {
      const bad = digits('in a number');
      if (bad) return bad;
    }
    if (text[j] === '.') {
      j++;
      const bad = digits("after '.'");
      if (bad) return bad;
    }
    if (text[j] === 'e' || text[j] === 'E') {
      j++;
      if (text[j] === '+' || text[j] === '-') j++;
      const bad = digits('in the exponent');
      if (bad) return bad;
    }
    return j;
  };

  const scanScalar = (at: number): number | JsonSyntaxProblem => {
    const c = text[at]!;
    if (c === '"') return scanString(at);
    for (const word of ['true', 'false', 'null']) if (text.startsWith(word, at)) return at + word.length;
    if (c === '-' || isDigit(at)) return scanNumber(at);
    return fail(at, `unexpected character ${shown(at)} where a value should start`);
  };

  for (;;) {
    while (i < n && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
    if (i >= n) return expect === 'after' && closers.length === 0 ? undefined : fail(n, 'the input ends before the JSON value is complete');
    const c = text[i]!;
    switch (expect) {
      case 'valueOrClose':
        if (c === ']') {
          closers.pop();
          i++;
          expect = 'after';
        } else expect = 'value'; // any other character must start a value: look at it again
        continue;
      case 'value': {
        if (c === '{' || c === '[') {
          closers.push(c === '{' ? '}' : ']');
          i++;
          expect = c === '{' ? 'keyOrClose' : 'valueOrClose';
          continue;
        }
        const next = scanScalar(i);
        if (typeof next !== 'number') return next;
        i = next;
        expect = 'after';
        continue;
      }
      case 'keyOrClose':
      case 'key': {
        if (c === '}' && expect === 'keyOrClose') {
          closers.pop();
          i++;
          expect = 'after';
          continue;
        }
        if (c !== '"') return fail(i, `expected a property name in double quotes, found ${shown(i)}`);
        const next = scanString(i);
        if (typeof next !== 'number') return next;
        i = next;
        expect = 'colon';
        continue;
      }
      case 'colon':
        if (c !== ':') return fail(i, `expected ':' after a property name, found ${shown(i)}`);
        i++;
        expect = 'value';
        continue;
      case 'after': {
        const top = closers[closers.length - 1];
        if (top === undefined) return fail(i, `unexpected ${shown(i)} after the end of the JSON value`);
        if (c === ',') {
          i++;
          expect = top === '}' ? 'key' : 'value';
        } else if (c === top) {
          closers.pop();
          i++;
        } else return fail(i, `expected ',' or '${top}', found ${shown(i)}`);
        continue;
      }
    }
  }
}

/** ` at line L, column C: reason` for the -32700 message, or '' if no position can be named. */
export function describeJsonSyntaxError(text: string): string {
  const problem = findJsonSyntaxError(text);
  return problem ? ` (line ${problem.line}, column ${problem.column}: ${problem.reason})` : '';
}
