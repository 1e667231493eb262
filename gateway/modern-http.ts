/**
 * The Streamable HTTP rules MCP 2026-07-28 adds for a modern request (transports/streamable-http,
 * "Request Metadata", "Server Validation"): one JSON-RPC message per POST; `MCP-Protocol-Version`,
 * `Mcp-Method` and (for tools/call) `Mcp-Name` present and equal to the body, after decoding the
 * `=?base64?…?=` form. So a proxy that routes on the headers can never be told one thing while
 * the server runs another. Every refusal is a 400 carrying the spec's JSON-RPC error.
 */
import { looksModern, requestEra, unsupportedVersion } from '../shared/mcp/envelope';
import { decodeHeaderValue } from '../shared/mcp/header-value';
import { isLegacyVersion, isModernVersion } from '../shared/mcp/versions';
import { ErrorCode, ErrorCodeValue, ProtocolError } from '../shared/protocol/errors';
import { classify, JsonRpcId } from '../shared/protocol/jsonrpc';
import { HttpProblem } from './errors';

/** The request headers these rules read (lower-case names, as Node gives them). */
export interface McpHeaders {
  protocolVersion?: string;
  method?: string;
  name?: string;
}

/** Methods whose target travels in `Mcp-Name`, and the params field it mirrors. */
const NAMED: ReadonlyMap<string, 'name' | 'uri' | 'taskId'> = new Map([
  ['tools/call', 'name'],
  ['prompts/get', 'name'],
  ['resources/read', 'uri'],
  // The tasks extension names its task the same way.
  ['tasks/get', 'taskId'],
  ['tasks/update', 'taskId'],
  ['tasks/cancel', 'taskId'],
]);

const badRequest = (code: ErrorCodeValue, message: string, id: JsonRpcId, data?: Record<string, unknown>) => new HttpProblem(400, code, message, {}, data, id);
const mismatch = (message: string, id: JsonRpcId) => badRequest(ErrorCode.HeaderMismatch, `Header mismatch: ${message}`, id);

/**
 * Whether this POST is a modern one: a single message carrying the modern envelope, or a
 * `MCP-Protocol-Version` header naming a revision that is not a legacy one. Legacy clients send
 * a legacy version (after `initialize`) or none; the spec's plain call sends neither.
 */
export function isModernPost(payload: unknown, headers: McpHeaders): boolean {
  const m = Array.isArray(payload) ? undefined : classify(payload);
  const method = m && (m.kind === 'request' || m.kind === 'notification') ? m : undefined;
  // `initialize` selects the legacy era, whatever header comes with it (a dual-era client's fallback).
  if (method && LEGACY_SELECTORS.has(method.method)) return false;
  if (headers.protocolVersion !== undefined && !isLegacyVersion(headers.protocolVersion)) return true;
  return method !== undefined && looksModern(method.method, method.params);
}

const LEGACY_SELECTORS: ReadonlySet<string> = new Set(['initialize', 'notifications/initialized']);

/**
 * Checks a modern POST against the rules above; throws the 400 to send. Returns nothing: the
 * dispatcher then serves the message (and reads the same envelope again, as stdio does).
 */
export function checkModernPost(payload: unknown, headers: McpHeaders): void {
  if (Array.isArray(payload)) {
    throw badRequest(ErrorCode.InvalidRequest, 'Invalid Request: MCP 2026-07-28 takes one JSON-RPC message per POST, not a batch', null);
  }
  const m = classify(payload);
  if (m.kind === 'invalid') throw badRequest(ErrorCode.InvalidRequest, `Invalid Request: ${m.reason}`, m.id);
  if (m.kind === 'response') throw badRequest(ErrorCode.InvalidRequest, 'Invalid Request: a client must not POST a JSON-RPC response', m.id);
  const id = m.kind === 'request' ? m.id : null;

  const version = headers.protocolVersion;
  if (version === undefined) throw mismatch('the MCP-Protocol-Version header is required', id);
  if (!isLegacyVersion(version) && !isModernVersion(version)) {
    const err = unsupportedVersion(version);
    throw badRequest(err.code, err.message, id, err.data);
  }
  if (isModernVersion(version) && !looksModern(m.method, m.params)) {
    // The header says modern but the body lacks the envelope: the body is what is malformed.
    throw badRequest(ErrorCode.InvalidParams, 'Invalid params: a 2026-07-28 request must carry "io.modelcontextprotocol/protocolVersion" in params._meta', id);
  }
  let era;
  try {
    era = requestEra(m.method, m.params);
  } catch (err) {
    if (err instanceof ProtocolError) throw badRequest(err.code, err.message, id, err.data);
    throw err;
  }
  // A body naming a legacy revision in `_meta` under a legacy header is served the legacy way.
  if (era.era === 'legacy' && isLegacyVersion(version)) return;
  const bodyVersion = era.era === 'modern' ? era.envelope.version : '(none)';
  if (version !== bodyVersion) throw mismatch(`MCP-Protocol-Version header value '${version}' does not match body value '${bodyVersion}'`, id);
  // Notifications: this revision defines no header requirements for them.
  if (m.kind === 'notification') return;

  if (headers.method === undefined) throw mismatch('the Mcp-Method header is required', id);
  if (headers.method !== m.method) throw mismatch(`Mcp-Method header value '${headers.method}' does not match body value '${m.method}'`, id);

  const field = NAMED.get(m.method);
  if (field === undefined) return;
  const params = m.params !== undefined && !Array.isArray(m.params) ? m.params : {};
  const bodyName = params[field];
  if (headers.name === undefined) throw mismatch(`the Mcp-Name header is required for ${m.method}`, id);
  const name = decodeHeaderValue(headers.name);
  if (name === undefined) throw mismatch('the Mcp-Name header value has invalid characters (use the =?base64?…?= form)', id);
  if (name !== bodyName) throw mismatch(`Mcp-Name header value '${name}' does not match body value '${String(bodyName)}'`, id);
}
