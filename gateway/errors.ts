/**
 * The gateway's one translation from a failure to an HTTP reply, and the Koa error boundary that
 * applies it. Every reply it builds is a JSON-RPC error object (id null: the request was refused
 * before any message in it was read), so even a refused caller gets a body it can parse.
 * Unexpected errors become a bare 500 "Internal error": details go to the log, never the caller.
 */
import type { Middleware } from 'koa';
import { TokenError, TokenMissing } from '../shared/auth/token-errors';
import type { Logger } from '../shared/log';
import { ErrorCode, ErrorCodeValue } from '../shared/protocol/errors';
import { failure, JsonRpcFailure, JsonRpcId } from '../shared/protocol/jsonrpc';
import { BearerSchemeRequired } from './auth/bearer';
import { drainRefused } from './drain';

/**
 * A refusal at the HTTP level: a status, headers, and the JSON-RPC error that explains it. `id`
 * is the request's own when it was read before the refusal (the 2026-07-28 header checks), else null.
 */
export class HttpProblem extends Error {
  override readonly name = 'HttpProblem';
  constructor(
    readonly status: number,
    readonly code: ErrorCodeValue,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
    readonly data?: Record<string, unknown>,
    readonly id: JsonRpcId = null,
  ) {
    super(message);
  }
}

/** The request body ended early because the client went away: nobody is left to answer. */
export class ClientGone extends Error {
  override readonly name = 'ClientGone';
}

export const methodNotAllowed = (allow: readonly string[]): HttpProblem =>
  new HttpProblem(405, ErrorCode.InvalidRequest, `Method not allowed: use ${allow.join(' or ')}`, { Allow: allow.join(', ') });

export const notFound = (): HttpProblem => new HttpProblem(404, ErrorCode.InvalidRequest, 'Not found: send JSON-RPC requests as POST to /');

export interface HttpReply {
  status: number;
  headers: Record<string, string>;
  body: JsonRpcFailure;
  /** True for a failure nobody planned for (a bug): it is logged at error level. */
  unexpected: boolean;
}

/** RFC 7230 quoted-string content: printable ASCII without `"` or `\` (our messages are plain ASCII). */
export const quotable = (text: string): string => text.replace(/["\\]/g, "'").replace(/[^\x20-\x7e]/g, '?');

/**
 * RFC 6750 §3: a request with no credentials gets a bare challenge; one with bad credentials
 * gets `error="invalid_token"` (or `invalid_request` for a malformed header) and a description.
 */
function challenge(err: TokenError): string {
  if (err instanceof TokenMissing) return 'Bearer realm="toolgate"';
  return `Bearer realm="toolgate", error="${challengeError(err)}", error_description="${quotable(err.message)}"`;
}

/** RFC 6750 §3.1's error code for a refused credential: a malformed header, or a bad token. */
export const challengeError = (err: TokenError): 'invalid_request' | 'invalid_token' =>
  err instanceof BearerSchemeRequired ? 'invalid_request' : 'invalid_token';

/**
 * The 401 for a refused credential, with the endpoint's challenge (its authenticator's, or the
 * default above). The message names the check that failed; token-errors.ts guarantees it never
 * quotes the token.
 */
export function unauthenticated(err: TokenError, wwwAuthenticate: string = challenge(err)): HttpProblem {
  return new HttpProblem(401, ErrorCode.Unauthenticated, `Unauthenticated: ${err.message}`, { 'WWW-Authenticate': wwwAuthenticate });
}

export function toHttpReply(err: unknown): HttpReply {
  if (err instanceof HttpProblem) {
    const error = err.data === undefined ? { code: err.code, message: err.message } : { code: err.code, message: err.message, data: err.data };
    return { status: err.status, headers: { ...err.headers }, body: failure(err.id, error), unexpected: false };
  }
  if (err instanceof TokenError) return toHttpReply(unauthenticated(err));
  return { status: 500, headers: {}, body: failure(null, { code: ErrorCode.InternalError, message: 'Internal error' }), unexpected: true };
}

/**
 * The error boundary: the first middleware. Whatever a later one throws becomes `toHttpReply`'s
 * answer. A request body left unread (refused before it was needed) is drained, so the reply is
 * read by the client rather than lost to a connection reset.
 */
export function errorBoundary(log: Logger, onRefused?: (status: number) => void): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      if (err instanceof ClientGone) {
        ctx.body = null;
        ctx.status = 499; // nginx's "client closed request": nothing is sent, but logs and metrics see it
        return;
      }
      const reply = toHttpReply(err);
      if (reply.unexpected) log.error({ err, method: ctx.method, path: ctx.path }, 'gateway request failed');
      else log.debug({ status: reply.status, code: reply.body.error.code, reason: reply.body.error.message }, 'request refused');
      await drainRefused(ctx.req, ctx.res);
      ctx.status = reply.status;
      ctx.set(reply.headers);
      ctx.type = 'application/json';
      ctx.body = JSON.stringify(reply.body);
      onRefused?.(reply.status);
    }
  };
}
