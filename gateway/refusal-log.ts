/**
 * Logs every request the JSON-RPC endpoint refused as a whole — 400, 401, 404/405, 413, 415,
 * a parse error — at info level, so an operator sees a misconfigured client or a probe without
 * turning on debug logs. The line carries the status, the JSON-RPC code and the reason the
 * caller was given (which never quotes a token), and the peer address. Never the Authorization
 * header, the body or the token.
 */
import type { Middleware } from 'koa';
import type { Logger } from '../shared/log';
import { ErrorCode } from '../shared/protocol/errors';

/** Refusal bodies are one small JSON-RPC error; anything longer is a real reply, not read here. */
const MAX_REFUSAL_BODY = 16 * 1024;

function refusalOf(body: unknown): { code: number; reason: string } | undefined {
  if (typeof body !== 'string' || body.length > MAX_REFUSAL_BODY || !body.startsWith('{')) return undefined;
  try {
    const error = (JSON.parse(body) as { error?: { code?: unknown; message?: unknown } }).error;
    if (error && typeof error.code === 'number') return { code: error.code, reason: String(error.message ?? '') };
  } catch {
    // not a JSON-RPC error body: nothing to log
  }
  return undefined;
}

export function refusalLog(log: Logger): Middleware {
  const parseErrorCode = `"code":${ErrorCode.ParseError}`;
  return async (ctx, next) => {
    await next();
    if (ctx.path !== '/') return;
    // A parse error travels with HTTP 200; only a small body naming its code is read to tell.
    const maybeParseError = ctx.status === 200 && typeof ctx.body === 'string' && ctx.body.length <= MAX_REFUSAL_BODY && ctx.body.includes(parseErrorCode);
    if (!(ctx.status >= 400 && ctx.status !== 499) && !maybeParseError) return;
    const error = refusalOf(ctx.body);
    if (ctx.status === 200 && error?.code !== ErrorCode.ParseError) return;
    log.info(
      { status: ctx.status, code: error?.code, reason: error?.reason, method: ctx.method, ip: ctx.ip, bytes: Number(ctx.get('Content-Length')) || undefined },
      'request refused',
    );
  };
}
