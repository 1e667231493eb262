/**
 * What a JSON-RPC POST body must be before it is parsed: `application/json` (media type parsed,
 * not substring-matched; UTF-8 only; no Content-Encoding), no larger than the limit (413, checked
 * against Content-Length first and then byte by byte), and valid UTF-8 (else -32700).
 */
import type { IncomingMessage } from 'node:http';
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';
import { BodyGuards, tooManyElements } from './body-cost';
import { ClientGone, HttpProblem } from './errors';

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const ESSENCE = new RegExp(`^[ \\t]*(${TOKEN})/(${TOKEN})[ \\t]*`);
const PARAMETER = new RegExp(`^;[ \\t]*(?:(${TOKEN})=(${TOKEN}|"(?:[^"\\\\]|\\\\.)*"))?[ \\t]*`);

export interface MediaType {
  /** `type/subtype`, lower-cased. */
  essence: string;
  /** Parameter names lower-cased, values unquoted. */
  parameters: Map<string, string>;
}

/** Parses a Content-Type value (RFC 9110 §8.3.1); undefined when it is not a media type at all. */
export function parseMediaType(value: string): MediaType | undefined {
  const head = ESSENCE.exec(value);
  if (!head) return undefined;
  const parameters = new Map<string, string>();
  let rest = value.slice(head[0].length);
  while (rest.length > 0) {
    const p = PARAMETER.exec(rest);
    if (!p || p[0].length === 0) return undefined;
    if (p[1] !== undefined && p[2] !== undefined) {
      const raw = p[2];
      parameters.set(p[1].toLowerCase(), raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw);
    }
    rest = rest.slice(p[0].length);
  }
  return { essence: `${head[1]}/${head[2]}`.toLowerCase(), parameters };
}

const unsupported = (message: string) => new HttpProblem(415, ErrorCode.InvalidRequest, `Unsupported Media Type: ${message}`, { Accept: 'application/json' });

/** `application/json`, optionally with `charset=utf-8` (JSON is UTF-8: RFC 8259 §8.1). */
export function requireJson(contentType: string | undefined, contentEncoding: string | undefined): void {
  if (contentType === undefined || contentType === '') throw unsupported('send Content-Type: application/json');
  const media = parseMediaType(contentType);
  if (!media || media.essence !== 'application/json') throw unsupported('Content-Type must be application/json');
  const charset = media.parameters.get('charset');
  if (charset !== undefined && !/^utf-?8$/i.test(charset)) throw unsupported('JSON must be sent as UTF-8');
  if (contentEncoding !== undefined && contentEncoding.trim().toLowerCase() !== 'identity') {
    throw unsupported('Content-Encoding is not supported; send the body uncompressed');
  }
}

const tooLarge = (limit: number) =>
  new HttpProblem(413, ErrorCode.MessageTooLarge, `Message too large: the body exceeds the limit of ${limit} bytes`, {}, { limit });

/**
 * Reads the whole body, refusing at the first byte past `limit` (and at once when Content-Length
 * says so). With `guards` (body-cost.ts) the body also counts against its identity's bytes in
 * flight (the declared length up front, else as it arrives) and its elements are counted as they
 * arrive: either refusal comes before the body is complete, let alone parsed. The error
 * boundary drains what the client still sends (drain.ts), so it reads the refusal.
 */
export function readBody(req: IncomingMessage, limit: number, guards?: BodyGuards): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(tooLarge(limit));
  let counted = 0;
  if (guards && declared !== undefined) {
    try {
      guards.take(Number(declared));
      counted = Number(declared);
    } catch (err) {
      return Promise.reject(err);
    }
  }
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        return reject(tooLarge(limit)); // the error boundary drains the rest
      }
      if (guards) {
        try {
          if (size > counted) guards.take(size - counted);
          counted = Math.max(counted, size);
        } catch (err) {
          cleanup();
          return reject(err);
        }
        if (!guards.shape.push(chunk)) {
          cleanup();
          return reject(tooManyElements(guards.shape.maxElements));
        }
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onGone = () => {
      cleanup();
      reject(new ClientGone('the client went away while sending its request'));
    };
    const onClose = () => {
      if (!req.readableEnded) onGone();
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onGone);
    req.once('close', onClose);
  });
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function decodeUtf8(body: Buffer): string {
  try {
    return utf8.decode(body);
  } catch {
    throw new ProtocolError(ErrorCode.ParseError, 'Parse error: the body is not valid UTF-8');
  }
}
