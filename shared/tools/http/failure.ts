/** Turns whatever stopped an http_request call into one sentence the model can act on. */
import { ToolError } from '../../protocol/errors';

export interface FailureContext {
  host: string;
  timedOut: boolean;
  timeoutMs: number;
  cancelled: boolean;
}

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_)/;

export function describeFailure(err: unknown, ctx: FailureContext): ToolError {
  // The deadline and cancellation come first: what undici throws then is only their echo.
  if (ctx.timedOut) return new ToolError(`Timed out after ${ctx.timeoutMs} ms waiting for ${ctx.host}`);
  if (ctx.cancelled) return new ToolError('The request was cancelled');
  if (err instanceof ToolError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  switch (code) {
    case 'ECONNREFUSED':
      return new ToolError(`Connection refused by ${ctx.host}`);
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return new ToolError(`The connection to ${ctx.host} closed before the response was complete`);
    case 'UND_ERR_CONNECT_TIMEOUT':
      return new ToolError(`Connecting to ${ctx.host} timed out`);
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return new ToolError(`${ctx.host} is unreachable from here (${code})`);
    case 'UND_ERR_HEADERS_OVERFLOW':
      return new ToolError(`The response headers from ${ctx.host} are too large`);
    case 'UND_ERR_INVALID_ARG':
    case 'UND_ERR_NOT_SUPPORTED':
      return new ToolError(`Invalid request: ${message}`);
  }
  if (typeof code === 'string' && TLS_CODES.test(code)) return new ToolError(`TLS failed with ${ctx.host}: ${message} (${code})`);
  return new ToolError(`Request to ${ctx.host} failed: ${message}${typeof code === 'string' ? ` (${code})` : ''}`);
}
