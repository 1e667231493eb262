/** Reading a response body under a byte cap, and deciding whether it is text or base64. */
import { PassThrough, Readable, Transform } from 'node:stream';
import { TextDecoder } from 'node:util';
import { ToolError } from '../../protocol/errors';
import { chain } from '../../secrets/content-coding';

/**
 * `body` through `decoders` (exchange.ts), for readCapped: the cap then counts decoded bytes, and
 * destroying the result stops the rest. A decoder's failure becomes the read's error, a sentence.
 */
export function decodedBody(body: Readable, decoders: readonly Transform[], host: string): PassThrough {
  const out = new PassThrough();
  const last = chain(decoders, (err) => out.destroy(new ToolError(`The body from ${host} does not decode as its content-encoding says (${err.message})`)));
  body.on('error', (err) => out.destroy(err));
  out.once('close', () => {
    body.destroy();
    for (const d of decoders) d.destroy();
  });
  body.pipe(decoders[0] as Transform);
  last.pipe(out);
  return out;
}

/**
 * Reads at most `max` bytes of `body`, then stops and destroys the stream: the rest is never
 * read, let alone kept. `truncated` is true when more bytes were on their way.
 */
export async function readCapped(body: AsyncIterable<Buffer> & { destroy(): unknown }, max: number): Promise<{ bytes: Buffer; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const room = max - size;
    if (chunk.length > room) {
      if (room > 0) chunks.push(chunk.subarray(0, room));
      size = max;
      body.destroy();
      return { bytes: Buffer.concat(chunks, size), truncated: true };
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return { bytes: Buffer.concat(chunks, size), truncated: false };
}

const TEXT_TYPES =
  /^(text\/.*|application\/(json|.*\+json|xml|.*\+xml|javascript|ecmascript|x-www-form-urlencoded|x-ndjson|graphql|yaml|x-yaml|toml)|image\/svg\+xml)$/;

/**
 * The body as the caller should see it: decoded text when the content type says text (in its
 * charset, UTF-8 by default), base64 otherwise. A compressed body is always base64. With no
 * content type, valid UTF-8 without NUL bytes counts as text.
 */
export function encodeBody(
  bytes: Buffer,
  contentType: string | undefined,
  contentEncoding: string | undefined,
  truncated: boolean,
): { body: string; bodyEncoding: 'utf8' | 'base64' } {
  const compressed = contentEncoding !== undefined && !/^\s*identity\s*$/i.test(contentEncoding);
  const [media = '', ...params] = (contentType ?? '').split(';').map((s) => s.trim());
  const charset =
    params
      .find((p) => /^charset=/i.test(p))
      ?.slice(8)
      .replace(/^"|"$/g, '') || 'utf-8';
  let text = !compressed && TEXT_TYPES.test(media.toLowerCase());
  if (!compressed && media === '') text = !bytes.includes(0) && isUtf8(bytes, truncated);
  if (!text) return { body: bytes.toString('base64'), bodyEncoding: 'base64' };
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset);
  } catch {
    decoder = new TextDecoder('utf-8');
  }
  // `stream: true` holds back a character cut in half by the byte cap instead of mangling it.
  return { body: decoder.decode(bytes, { stream: truncated }), bodyEncoding: 'utf8' };
}

function isUtf8(bytes: Buffer, truncated: boolean): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes, { stream: truncated });
    return true;
  } catch {
    return false;
  }
}
