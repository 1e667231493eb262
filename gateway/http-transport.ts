/**
 * JSON-RPC over HTTP (spec §4, DESIGN §3): `POST /` with `Authorization: Bearer <token>` and
 * `Content-Type: application/json`, one request or a batch, answered `application/json`.
 * Stateless: each POST is dispatched on its own, no session, no `initialize` needed. Checks run
 * cheapest-first and before any body byte is read: identity (401), MCP-Protocol-Version (400),
 * media type (415), size (413). Then JSON errors are JSON-RPC errors with HTTP 200, and a body of
 * only notifications gets 202 with no body. A client that disconnects aborts its calls.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Middleware } from 'koa';
import type { Caller } from '../shared/auth/permissions';
import { LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from '../shared/mcp/versions';
import { Dispatcher, InFlight, serialize } from '../shared/protocol/dispatcher';
import { ErrorCode, ProtocolError, toErrorObject } from '../shared/protocol/errors';
import { failure, parseJson } from '../shared/protocol/jsonrpc';
import type { Authenticate } from './auth';
import { ClientGone, HttpProblem } from './errors';
import type { GatewayMetrics } from './metrics';

export interface RpcEndpointOptions {
  dispatcher: Dispatcher<Caller>;
  authenticate: Authenticate;
  /** Largest request body accepted, in bytes (TOOLGATE_MAX_MESSAGE_BYTES). */
  maxBodyBytes: number;
  metrics?: GatewayMetrics;
}

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
function requireJson(contentType: string | undefined, contentEncoding: string | undefined): void {
  if (contentType === undefined || contentType === '') throw unsupported('send Content-Type: application/json');
  const media = parseMediaType(contentType);
  if (!media || media.essence !== 'application/json') throw unsupported('Content-Type must be application/json');
  const charset = media.parameters.get('charset');
  if (charset !== undefined && !/^utf-?8$/i.test(charset)) throw unsupported('JSON must be sent as UTF-8');
  if (contentEncoding !== undefined && contentEncoding.trim().toLowerCase() !== 'identity') {
    throw unsupported('Content-Encoding is not supported; send the body uncompressed');
  }
}

/**
 * MCP over HTTP: a protocol version header the server cannot speak is answered 400. A version
 * newer than ours passes: such a client may be probing (`server/discover` → -32601) before it
 * falls back to `initialize`, and a 400 would stop it from ever getting there.
 */
function requireKnownProtocolVersion(header: string | undefined): void {
  if (header === undefined) return;
  const version = header.trim();
  const known = SUPPORTED_PROTOCOL_VERSIONS as readonly string[];
  if (known.includes(version) || (/^\d{4}-\d{2}-\d{2}$/.test(version) && version > LATEST_PROTOCOL_VERSION)) return;
  throw new HttpProblem(400, ErrorCode.InvalidRequest, `Bad Request: unsupported MCP-Protocol-Version; supported: ${known.join(', ')}`, {}, {
    supported: [...known],
  });
}

const tooLarge = (limit: number) =>
  new HttpProblem(413, ErrorCode.MessageTooLarge, `Message too large: the body exceeds the limit of ${limit} bytes`, {}, { limit });

/** Reads the whole body, refusing at the first byte past `limit` (and at once when Content-Length says so). */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(tooLarge(limit));
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

function decodeUtf8(body: Buffer): string {
  try {
    return utf8.decode(body);
  } catch {
    throw new ProtocolError(ErrorCode.ParseError, 'Parse error: the body is not valid UTF-8');
  }
}

/** A signal aborted when the client disconnects before its reply has been sent. */
function disconnectSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableEnded) controller.abort(new ProtocolError(ErrorCode.Cancelled, 'Request cancelled: the client disconnected'));
  });
  return controller.signal;
}

export function rpcEndpoint(options: RpcEndpointOptions): Middleware {
  const { dispatcher, authenticate, maxBodyBytes, metrics } = options;
  return async (ctx) => {
    const caller = authenticate(ctx.get('Authorization') || undefined);
    requireKnownProtocolVersion(ctx.get('MCP-Protocol-Version') || undefined);
    requireJson(ctx.get('Content-Type') || undefined, ctx.get('Content-Encoding') || undefined);
    const body = await readBody(ctx.req, maxBodyBytes);

    let payload: unknown;
    try {
      payload = parseJson(decodeUtf8(body));
    } catch (err) {
      const reply = failure(null, toErrorObject(err));
      metrics?.replied(reply);
      ctx.type = 'application/json';
      ctx.body = JSON.stringify(reply);
      return;
    }

    const signal = disconnectSignal(ctx.res);
    const reply = await dispatcher.dispatch(payload, caller, new InFlight(), signal);
    if (signal.aborted) throw new ClientGone('the client disconnected before its reply was ready');
    if (reply === undefined) {
      // Only notifications (or only requests cancelled in this same body): nothing to answer.
      ctx.body = null;
      ctx.status = 202;
      return;
    }
    metrics?.replied(reply);
    ctx.type = 'application/json';
    ctx.body = serialize(reply);
  };
}
