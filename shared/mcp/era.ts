/**
 * What every MCP method handler shares: the two protocol eras' rules around a handler (the
 * modern envelope checked, the method offered in its era, the result shaped) and the small
 * parameter checks. Used by server.ts and task-methods.ts.
 */
import type { Caller } from '../auth/permissions';
import type { CallContext, MethodHandler } from '../protocol/dispatcher';
import { ErrorCode, ProtocolError } from '../protocol/errors';
import type { JsonRpcParams } from '../protocol/jsonrpc';
import { TOOLGATE_VERSION } from '../version';
import { META_SERVER_INFO, RequestEra, requestEra } from './envelope';
import { TASKS_EXTENSION } from './tasks';

export const SERVER_INFO = Object.freeze({ name: 'toolgate', version: TOOLGATE_VERSION });

export const asObject = (params: JsonRpcParams | undefined): Record<string, unknown> =>
  params === undefined ? {} : Array.isArray(params) ? invalidParams('params must be an object') : params;

export function invalidParams(message: string): never {
  throw new ProtocolError(ErrorCode.InvalidParams, message);
}

/** A 2026-07-28 result: `resultType` and our identity in `_meta`, beside what the method returned. */
function modernResult(result: unknown, extra?: Record<string, unknown>): Record<string, unknown> {
  const body = (typeof result === 'object' && result !== null ? result : {}) as Record<string, unknown>;
  const meta = typeof body._meta === 'object' && body._meta !== null ? (body._meta as Record<string, unknown>) : {};
  // A handler may say what kind of result it is (a task handle: "task"); anything else is complete.
  const resultType = typeof body.resultType === 'string' ? body.resultType : 'complete';
  return { ...body, ...extra, resultType, _meta: { ...meta, [META_SERVER_INFO]: SERVER_INFO } };
}

export type EraHandler = (params: JsonRpcParams | undefined, ctx: CallContext<Caller>, era: RequestEra) => unknown;

/** Which era a method exists in. Removed-in-2026 methods are "not found" for modern requests. */
export type Eras = 'both' | 'modern' | 'legacy';

/**
 * Wraps a handler with the era rules: envelope checked, method offered in that era, result
 * shaped. Not `async`: a legacy result (or its promise) is handed on as it is, without a promise
 * and three microtask turns more per call; a throw here reaches the dispatcher like a rejection.
 */
export const serve =
  (method: string, eras: Eras, handle: EraHandler): MethodHandler<Caller> =>
  (params, ctx) => {
    const era = requestEra(method, params);
    if (eras !== 'both' && era.era !== eras) {
      const why = era.era === 'modern' ? 'MCP 2026-07-28 removed it' : 'it belongs to MCP 2026-07-28 and needs the modern _meta envelope';
      throw new ProtocolError(ErrorCode.MethodNotFound, `Method not found: ${method} (${why})`);
    }
    const result = handle(params, ctx, era);
    return era.era === 'modern' ? Promise.resolve(result).then((r) => modernResult(r)) : result;
  };

/** Whether a modern request declared the tasks extension (legacy requests ask per call instead). */
export function declaresTasks(era: RequestEra): boolean {
  if (era.era !== 'modern') return false;
  const extensions = era.envelope.capabilities.extensions;
  return typeof extensions === 'object' && extensions !== null && TASKS_EXTENSION in extensions;
}
