/**
 * JSON-RPC over HTTP (spec §4, DESIGN §3): `POST /` with `Authorization: Bearer <token>` and
 * `Content-Type: application/json`, one request or a batch, answered `application/json`.
 * Stateless: each POST is dispatched on its own, no session, no `initialize` needed. Checks run
 * cheapest-first and before any body byte is read: identity (401), MCP-Protocol-Version (400),
 * media type (415), size (413). Then JSON errors are JSON-RPC errors with HTTP 200, and a body of
 * only notifications gets 202 with no body. A client that disconnects aborts its calls.
 */
import type { ServerResponse } from 'node:http';
import type { Middleware } from 'koa';
import type { Caller } from '../shared/auth/permissions';
import { LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from '../shared/mcp/versions';
import { Dispatcher, InFlight, serialize } from '../shared/protocol/dispatcher';
import { ErrorCode, ProtocolError, toErrorObject } from '../shared/protocol/errors';
import { failure, parseJson } from '../shared/protocol/jsonrpc';
import type { Authenticate } from './auth';
import { ClientGone, HttpProblem } from './errors';
import type { GatewayMetrics } from './metrics';
import { decodeUtf8, readBody, requireJson } from './request-body';

export interface RpcEndpointOptions {
  dispatcher: Dispatcher<Caller>;
  authenticate: Authenticate;
  /** Largest request body accepted, in bytes (TOOLGATE_MAX_MESSAGE_BYTES). */
  maxBodyBytes: number;
  metrics?: GatewayMetrics;
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
