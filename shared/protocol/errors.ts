/**
 * The one catalogue of error codes toolgate puts on the wire. Every JSON-RPC error a caller can
 * receive is built from an entry here; each transport translates a ProtocolError in exactly one
 * place (stdio: the session; HTTP: the gateway's error boundary). The README documents each code.
 *
 * -32700..-32600 are JSON-RPC 2.0's own. MCP 2026-07-28 splits JSON-RPC's server-error range:
 * -32020..-32099 belongs to the MCP specification (we emit only the codes it defines, with their
 * meanings), -32000..-32019 stays implementation-defined. Ours live there, but never on -32000
 * (connection closed) or -32001 (request timed out), which the official SDKs raise for their own
 * client-side failures, nor on -32002 (resource not found in earlier MCP revisions): a caller
 * must never read "unauthenticated" as "timed out".
 */
export const ErrorCode = {
  /** Invalid JSON was received. */
  ParseError: -32700,
  /** The JSON sent is not a valid Request object (also: an empty batch, too deep, too large). */
  InvalidRequest: -32600,
  /** The method does not exist, or not in the request's protocol era (e.g. `ping` for a 2026-07-28 request). */
  MethodNotFound: -32601,
  /** Invalid method parameters: an unknown tool name in `tools/call`, a 2026-07-28 request without its required `_meta`. */
  InvalidParams: -32602,
  /** An internal error; details are logged, never sent. */
  InternalError: -32603,
  /** The request carries no valid identity (HTTP: missing, malformed, expired or revoked token). */
  Unauthenticated: -32008,
  /** A browser page from an origin that is not allowed (HTTP 403; DNS-rebinding defence), or a Host that is not ours. */
  OriginNotAllowed: -32009,
  /** The caller's token lacks the permission this tool needs. `data.permission` names it. */
  PermissionDenied: -32003,
  /** A per-identity limit was hit. `data.retryAfterMs` says when to try again. */
  RateLimited: -32004,
  /** The call's deadline passed before a reply came. */
  Timeout: -32005,
  /**
   * A component the call needs (bus, executor, sandbox) is down, and the call did not run: no
   * executor started it, so retrying later cannot run it twice. Only said when that is known.
   */
  Unavailable: -32006,
  /**
   * The call was handed to an executor (or its sandbox), and then its answer was lost (Redis
   * lost the job, the executor or sandbox died, a shutdown stopped it): it may have run, in
   * whole or in part. Not safe to retry blindly — look first, or retry only an idempotent call.
   * A code of its own rather than -32006 with a flag: a client that retries -32006 as the README
   * once said never re-runs such a call, and a switch on `code` is all any client needs.
   */
  OutcomeUnknown: -32010,
  /** A message is larger than the configured limit. `data.limit` gives it in bytes. */
  MessageTooLarge: -32007,
  /** MCP 2026-07-28 HeaderMismatch: an HTTP `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name` header is missing, malformed or disagrees with the body. */
  HeaderMismatch: -32020,
  /** MCP 2026-07-28 MissingRequiredClientCapability: the call needs a capability the request did not declare. */
  MissingRequiredClientCapability: -32021,
  /** MCP 2026-07-28 UnsupportedProtocolVersion: `data.supported` lists ours, `data.requested` echoes the request's. */
  UnsupportedProtocolVersion: -32022,
  /** The request was cancelled (by `notifications/cancelled` or by the caller going away). */
  Cancelled: -32800,
} as const;

export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

/** A failure that crosses the wire as a JSON-RPC error object. */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
  constructor(
    readonly code: ErrorCodeValue,
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/**
 * A failure while a tool runs (file not found, refused path, timeout). It becomes a tool result
 * with `isError: true` and this message, so the model can read it and correct itself.
 */
export class ToolError extends Error {
  override readonly name = 'ToolError';
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/** The only translation from a thrown value to a wire error: unknown errors never leak detail. */
export function toErrorObject(err: unknown): JsonRpcErrorObject {
  if (err instanceof ProtocolError) {
    return err.data === undefined ? { code: err.code, message: err.message } : { code: err.code, message: err.message, data: err.data };
  }
  return { code: ErrorCode.InternalError, message: 'Internal error' };
}
