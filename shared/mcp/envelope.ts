/**
 * The per-request envelope of MCP 2026-07-28: protocol version, client capabilities and client
 * identity travel in `params._meta` on every request. This module decides a request's era and
 * reads its envelope; stdio (through the MCP server) and HTTP (before dispatch, to compare the
 * headers) use the same reading, so both refuse the same requests with the same errors.
 */
import { ErrorCode, ProtocolError } from '../protocol/errors';
import type { JsonRpcParams } from '../protocol/jsonrpc';
import type { TraceContext } from '../trace';
import { ALL_PROTOCOL_VERSIONS, isLegacyVersion, isModernVersion } from './versions';

export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const META_CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo';

/** Methods that exist only in the modern era: they carry the envelope by definition. */
const MODERN_ONLY_METHODS: ReadonlySet<string> = new Set(['server/discover']);

export interface ModernEnvelope {
  version: string;
  capabilities: Record<string, unknown>;
  clientInfo?: { name: string; version: string };
}

export type RequestEra = { era: 'legacy' } | { era: 'modern'; envelope: ModernEnvelope };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function metaOf(params: JsonRpcParams | undefined): Record<string, unknown> | undefined {
  if (!isObject(params)) return undefined;
  return isObject(params._meta) ? params._meta : undefined;
}

/**
 * True when the request opens the modern way: it names a protocol version in `_meta`, carries
 * any other per-request key of the envelope, or calls a modern-only method. Anything else is
 * served as today (legacy, stateless): the spec's own `tools/list` with no `_meta` included.
 */
export function looksModern(method: string, params: JsonRpcParams | undefined): boolean {
  if (MODERN_ONLY_METHODS.has(method)) return true;
  const meta = metaOf(params);
  return meta !== undefined && (META_PROTOCOL_VERSION in meta || META_CLIENT_CAPABILITIES in meta);
}

export function unsupportedVersion(requested: string): ProtocolError {
  return new ProtocolError(ErrorCode.UnsupportedProtocolVersion, `Unsupported protocol version: ${requested}; supported: ${ALL_PROTOCOL_VERSIONS.join(', ')}`, {
    supported: [...ALL_PROTOCOL_VERSIONS],
    requested,
  });
}

const missing = (what: string) =>
  new ProtocolError(ErrorCode.InvalidParams, `Invalid params: a 2026-07-28 request must carry ${what} in params._meta`, { missing: what });

/**
 * The request's era, and for a modern one its envelope. Throws the spec's errors: -32602 when a
 * required field is missing or mistyped, -32022 for a version we do not speak. A `_meta` naming
 * a legacy revision is served the legacy way (stateless, as the spec's plain HTTP call is).
 */
export function requestEra(method: string, params: JsonRpcParams | undefined): RequestEra {
  if (!looksModern(method, params)) return { era: 'legacy' };
  const meta = metaOf(params) ?? {};
  const version = meta[META_PROTOCOL_VERSION];
  if (typeof version !== 'string' || version === '') throw missing(`"${META_PROTOCOL_VERSION}" (a string)`);
  if (isLegacyVersion(version) && !MODERN_ONLY_METHODS.has(method)) return { era: 'legacy' };
  if (!isModernVersion(version)) throw unsupportedVersion(version);
  const capabilities = meta[META_CLIENT_CAPABILITIES];
  if (!isObject(capabilities)) throw missing(`"${META_CLIENT_CAPABILITIES}" (an object)`);
  const envelope: ModernEnvelope = { version, capabilities };
  const info = meta[META_CLIENT_INFO];
  if (isObject(info) && typeof info.name === 'string' && typeof info.version === 'string') envelope.clientInfo = { name: info.name, version: info.version };
  return { era: 'modern', envelope };
}

/** W3C traceparent: version-traceid-parentid-flags, lower-case hex (https://www.w3.org/TR/trace-context/). */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;
/** tracestate: at most 32 list members; printable ASCII; bounded so a log line stays small. */
const TRACESTATE = /^[\x20-\x7e]{1,512}$/;

/** Trace context from `_meta`, when well-formed (a malformed one is dropped, never an error). */
export function traceOf(params: JsonRpcParams | undefined): TraceContext | undefined {
  const meta = metaOf(params);
  if (!meta) return undefined;
  const { traceparent, tracestate } = meta;
  if (typeof traceparent !== 'string' || !TRACEPARENT.test(traceparent) || /^0+$/.test(traceparent.split('-')[1]!)) return undefined;
  const trace: TraceContext = { traceparent };
  if (typeof tracestate === 'string' && TRACESTATE.test(tracestate)) trace.tracestate = tracestate;
  return trace;
}
