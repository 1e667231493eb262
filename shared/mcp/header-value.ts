/**
 * MCP 2026-07-28's header value encoding (Streamable HTTP, "Value Encoding"): a value that is
 * header-safe as it is (visible ASCII, no leading or trailing whitespace) travels plain; any
 * other, and any plain value that looks like the sentinel itself, as `=?base64?<UTF-8 base64>?=`.
 * The shim encodes with it; the gateway decodes before comparing a header with the body.
 */
const HEADER_SAFE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;
const SENTINEL = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/;

export function encodeHeaderValue(value: string): string {
  const plain = HEADER_SAFE.test(value) && !(value.startsWith('=?base64?') && value.endsWith('?='));
  return plain ? value : `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

/** The value a header carries, or undefined when it is neither header-safe nor a well-formed sentinel. */
export function decodeHeaderValue(raw: string): string | undefined {
  const encoded = SENTINEL.exec(raw);
  if (encoded) {
    const bytes = Buffer.from(encoded[1]!, 'base64');
    const text = bytes.toString('utf8');
    // Invalid UTF-8 would decode to U+FFFD and could compare equal to a body holding one.
    return Buffer.from(text, 'utf8').equals(bytes) ? text : undefined;
  }
  if (raw.startsWith('=?base64?')) return undefined;
  return HEADER_SAFE.test(raw) ? raw : undefined;
}
