/** Byte-level helpers for line windows and UTF-8 boundaries (working on bytes keeps offsets exact). */
const NL = 0x0a;

/** The index just after the `n`th newline, or undefined when `bytes` holds fewer than `n`. */
export function headEnd(bytes: Buffer, n: number): number | undefined {
  let at = -1;
  for (let i = 0; i < n; i++) {
    at = bytes.indexOf(NL, at + 1);
    if (at === -1) return undefined;
  }
  return at + 1;
}

/** Where the last `n` lines start (a final newline ends the last line), or undefined when there are fewer. */
export function tailStart(bytes: Buffer, n: number): number | undefined {
  let end = bytes.length > 0 && bytes[bytes.length - 1] === NL ? bytes.length - 1 : bytes.length;
  for (let i = 0; i < n; i++) {
    const at = end === 0 ? -1 : bytes.lastIndexOf(NL, end - 1);
    if (at === -1) return undefined;
    if (i === n - 1) return at + 1;
    end = at;
  }
  return undefined;
}

const isContinuation = (b: number | undefined): boolean => b !== undefined && (b & 0xc0) === 0x80;

/** The length of the longest prefix that does not end inside a UTF-8 character. */
export function utf8Prefix(bytes: Buffer): number {
  for (let back = 1; back <= Math.min(4, bytes.length); back++) {
    const b = bytes[bytes.length - back]!;
    if (isContinuation(b)) continue;
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? bytes.length - back : bytes.length;
  }
  return bytes.length;
}

/** How many leading bytes to skip so the text does not start inside a UTF-8 character. */
export function utf8Start(bytes: Buffer): number {
  let i = 0;
  while (i < 3 && isContinuation(bytes[i])) i++;
  return i;
}
