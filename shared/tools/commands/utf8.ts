/**
 * Byte windows cut at arbitrary offsets can split a UTF-8 character; these keep text pages
 * clean without changing what the offsets mean.
 */

/** The length of `buf` without a trailing, incomplete UTF-8 sequence (so the next page starts on it). */
export function completeUtf8Length(buf: Buffer): number {
  const len = buf.length;
  for (let i = len - 1; i >= 0 && i >= len - 4; i--) {
    const byte = buf[i]!;
    if ((byte & 0xc0) === 0x80) continue; // continuation byte: keep looking for the lead
    const need = byte < 0x80 ? 1 : byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return i + need > len ? i : len;
  }
  return len;
}

/** How many leading continuation bytes `buf` has (at most 3): the tail of a character cut off before it. */
export function leadingContinuationBytes(buf: Buffer): number {
  let n = 0;
  while (n < 3 && n < buf.length && (buf[n]! & 0xc0) === 0x80) n++;
  return n;
}
