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
  return new JsonScanner(text).run();
}

/** Past a token: the index after it, or the problem that stopped it. */
type Scan = number | JsonSyntaxProblem;

/** One pass over a text: the structure (an explicit stack of closers) and its tokens. */
class JsonScanner {
  private readonly n: number;
  private readonly closers: Array<'}' | ']'> = [];
  private i = 0;
  private expect: Expect = 'value';

  constructor(private readonly text: string) {
    this.n = text.length;
  }

  run(): JsonSyntaxProblem | undefined {
    const { text, n } = this;
    for (;;) {
      while (this.i < n && (text[this.i] === ' ' || text[this.i] === '\t' || text[this.i] === '\n' || text[this.i] === '\r')) this.i++;
      if (this.i >= n) {
        return this.expect === 'after' && this.closers.length === 0 ? undefined : this.fail(n, 'the input ends before the JSON value is complete');
      }
      const problem = this.step(text[this.i]!);
      if (problem) return problem;
    }
  }

  /** Takes the structure one character (or one token) further from `c`, the next non-blank one. */
  private step(c: string): JsonSyntaxProblem | undefined {
    switch (this.expect) {
      case 'valueOrClose':
        if (c === ']') this.close();
        else this.expect = 'value'; // any other character must start a value: look at it again
        return undefined;
      case 'value':
        if (c === '{' || c === '[') {
          this.closers.push(c === '{' ? '}' : ']');
          this.i++;
          this.expect = c === '{' ? 'keyOrClose' : 'valueOrClose';
          return undefined;
        }
        return this.advance(this.scanScalar(this.i), 'after');
      case 'keyOrClose':
      case 'key':
        if (c === '}' && this.expect === 'keyOrClose') {
          this.close();
          return undefined;
        }
        if (c !== '"') return this.fail(this.i, `expected a property name in double quotes, found ${this.shown(this.i)}`);
        return this.advance(this.scanString(this.i), 'colon');
      case 'colon':
        if (c !== ':') return this.fail(this.i, `expected ':' after a property name, found ${this.shown(this.i)}`);
        this.i++;
        this.expect = 'value';
        return undefined;
      case 'after': {
        const top = this.closers[this.closers.length - 1];
        if (top === undefined) return this.fail(this.i, `unexpected ${this.shown(this.i)} after the end of the JSON value`);
        if (c === ',') {
          this.i++;
          this.expect = top === '}' ? 'key' : 'value';
        } else if (c === top) {
          this.closers.pop();
          this.i++;
        } else return this.fail(this.i, `expected ',' or '${top}', found ${this.shown(this.i)}`);
        return undefined;
      }
    }
  }

  private close(): void {
    this.closers.pop();
    this.i++;
    this.expect = 'after';
  }

  /** Moves past a scanned token and on to `next`, or hands its problem back. */
  private advance(scanned: Scan, next: Expect): JsonSyntaxProblem | undefined {
    if (typeof scanned !== 'number') return scanned;
    this.i = scanned;
    this.expect = next;
    return undefined;
  }

  private fail(offset: number, reason: string): JsonSyntaxProblem {
    let line = 1;
    let lineStart = 0;
    for (let k = 0; k < offset; k++) {
      if (this.text.charCodeAt(k) === 10) {
        line++;
        lineStart = k + 1;
      }
    }
    return { offset, line, column: offset - lineStart + 1, reason };
  }

  private shown(at: number): string {
    return JSON.stringify(this.text[at]);
  }

  private isDigit(at: number): boolean {
    return at < this.n && this.text.charCodeAt(at) >= 48 && this.text.charCodeAt(at) <= 57;
  }

  /** Past the string starting at `at` (a '"'), or a problem. */
  private scanString(at: number): Scan {
    const { text, n } = this;
    for (let j = at + 1; j < n; j++) {
      const c = text.charCodeAt(j);
      if (c === 34) return j + 1;
      if (c < 0x20) return this.fail(j, 'a control character inside a string (escape it, e.g. \\n)');
      if (c === 92) {
        const e = text[j + 1];
        if (e === 'u') {
          for (let h = j + 2; h < j + 6; h++) {
            if (h >= n) return this.fail(n, 'the input ends inside a string');
            if (!/[0-9a-fA-F]/.test(text[h]!)) return this.fail(h, 'a \\u escape needs four hex digits');
          }
          j += 5;
        } else if (e === undefined) return this.fail(n, 'the input ends inside a string');
        else if (ESCAPES.has(e)) j++;
        else return this.fail(j + 1, 'an invalid escape in a string');
      }
    }
    return this.fail(n, 'the input ends inside a string');
  }

  /** Past the number starting at `at`, or a problem at the first character that breaks it. */
  private scanNumber(at: number): Scan {
    const { text } = this;
    let j = at;
    if (text[j] === '-') j++;
    const digits = (what: string): JsonSyntaxProblem | undefined => {
      if (!this.isDigit(j))
        return j >= this.n ? this.fail(this.n, 'the input ends inside a number') : this.fail(j, `expected a digit ${what}, found ${this.shown(j)}`);
      while (this.isDigit(j)) j++;
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
  }

  private scanScalar(at: number): Scan {
    const c = this.text[at]!;
    if (c === '"') return this.scanString(at);
    for (const word of ['true', 'false', 'null']) if (this.text.startsWith(word, at)) return at + word.length;
    if (c === '-' || this.isDigit(at)) return this.scanNumber(at);
    return this.fail(at, `unexpected character ${this.shown(at)} where a value should start`);
  }
}

/** ` at line L, column C: reason` for the -32700 message, or '' if no position can be named. */
export function describeJsonSyntaxError(text: string): string {
  const problem = findJsonSyntaxError(text);
  return problem ? ` (line ${problem.line}, column ${problem.column}: ${problem.reason})` : '';
}
