/**
 * JSON-RPC over HTTP (spec §4, DESIGN §3): `POST /` with `Authorization: Bearer <token>` and
 * `Content-Type: application/json`, one request or a batch, answered `application/json`.
 * Stateless: each POST is dispatched on its own, no session, no `initialize` needed. Checks run
 * cheapest-first: identity (401), media type (415), size (413) before any body byte is read.
 * A modern (MCP 2026-07-28) POST then meets that revision's header rules (400, see
 * modern-http.ts), and a method it does not offer is a 404. Otherwise JSON-RPC errors travel with
 * HTTP 200, and a body of only notifications gets 202 with no body. A client that disconnects
 * aborts its calls.
 */
import type { ServerResponse } from 'node:http';
import type { Middleware } from 'koa';
import { isPermission, type Caller, type Permission } from '../shared/auth/permissions';
import { TokenError } from '../shared/auth/token-errors';
import { Dispatcher, InFlight, NotifySink, ReplyPayload } from '../shared/protocol/dispatcher';
import { ErrorCode, toErrorObject } from '../shared/protocol/errors';
import { failure, parseJson } from '../shared/protocol/jsonrpc';
import type { Authenticator } from './auth/authenticator';
import type { BodyCost } from './body-cost';
import { ClientGone, unauthenticated } from './errors';
import { acceptsEventStream, EventStream } from './event-stream';
import { checkModernPost, isModernPost, McpHeaders } from './modern-http';
import type { GatewayMetrics } from './metrics';
import { decodeUtf8, readBody, requireJson } from './request-body';

export interface RpcEndpointOptions {
  dispatcher: Dispatcher<Caller>;
  /** Who may call this endpoint (401 before anything else is looked at). */
  authenticator: Authenticator;
  /** Largest request body accepted, in bytes (TOOLGATE_MAX_MESSAGE_BYTES). */
  maxBodyBytes: number;
  /** Per-identity body bytes in flight and elements per body (body-cost.ts); unset: only the size limit. */
  bodyCost?: BodyCost;
  metrics?: GatewayMetrics;
}

/**
 * Cancels the POST's requests when the client disconnects before its reply has been sent; true
 * once it has. The requests' own signals (InFlight) are what is aborted: a signal of the
 * connection's besides, which each request's would follow, would be a second AbortController and
 * listener per call for the same event.
 */
function onDisconnect(res: ServerResponse, inflight: InFlight): { readonly gone: boolean } {
  const state = { gone: false };
  res.once('close', () => {
    if (res.writableEnded) return;
    state.gone = true;
    inflight.cancelAll('the client disconnected');
  });
  return state;
}

export function rpcEndpoint(options: RpcEndpointOptions): Middleware {
  const { dispatcher, authenticator, maxBodyBytes, bodyCost, metrics } = options;
  return async (ctx) => {
    let caller: Caller;
    try {
      caller = await authenticator.authenticate({ authorization: ctx.get('Authorization') || undefined });
    } catch (err) {
      throw err instanceof TokenError && authenticator.challenge ? unauthenticated(err, authenticator.challenge(err)) : err;
    }
    requireJson(ctx.get('Content-Type') || undefined, ctx.get('Content-Encoding') || undefined);
    const body = await readBody(ctx.req, maxBodyBytes, bodyCost?.guards(caller.tenant, ctx.res));

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

    const headers = mcpHeaders(ctx.get.bind(ctx));
    const modern = isModernPost(payload, headers);
    if (modern) checkModernPost(payload, headers);

    const inflight = new InFlight();
    const client = onDisconnect(ctx.res, inflight);
    // A single request that asked for progress, from a client that reads event streams, may get
    // its notifications as they happen; the stream opens with the first one.
    let stream: EventStream | undefined;
    const notify: NotifySink | undefined =
      !Array.isArray(payload) && acceptsEventStream(ctx.get('Accept') || undefined)
        ? () => (method, params) => {
            if (client.gone) return;
            stream ??= new EventStream(ctx);
            stream.send(JSON.stringify({ jsonrpc: '2.0', method, params }));
          }
        : undefined;
    const reply = await dispatcher.dispatch(payload, caller, inflight, undefined, notify);
    if (stream) {
      // The headers (200) went out with the first event: the reply, whatever it is, is the last one.
      if (reply !== undefined && !client.gone) {
        metrics?.replied(reply);
        stream.send(dispatcher.serialize(reply));
      }
      stream.end();
      return;
    }
    if (client.gone) throw new ClientGone('the client disconnected before its reply was ready');
    if (reply === undefined) {
      // Only notifications (or only requests cancelled in this same body): nothing to answer.
      ctx.body = null;
      ctx.status = 202;
      return;
    }
    metrics?.replied(reply);
    if (modern) ctx.status = modernStatus(reply);
    const stepUp = authenticator.insufficientScope && deniedPermission(reply);
    if (stepUp) {
      ctx.status = 403;
      ctx.set('WWW-Authenticate', authenticator.insufficientScope!(stepUp, caller));
    }
    ctx.type = 'application/json';
    ctx.body = dispatcher.serialize(reply);
  };
}

const header = (get: (name: string) => string, name: string): string | undefined => {
  const value = get(name);
  return value === '' ? undefined : value;
};

function mcpHeaders(get: (name: string) => string): McpHeaders {
  const headers: McpHeaders = {};
  const version = header(get, 'MCP-Protocol-Version');
  const method = header(get, 'Mcp-Method');
  const name = header(get, 'Mcp-Name');
  if (version !== undefined) headers.protocolVersion = version.trim();
  if (method !== undefined) headers.method = method;
  if (name !== undefined) headers.name = name;
  return headers;
}

/**
 * The HTTP status of a modern reply (2026-07-28 transport): a method the server does not offer
 * → 404; the spec's own request errors → 400. Everything else (a tool's failure, an unknown tool,
 * a missing permission) is an ordinary JSON-RPC error with 200, as in the legacy era.
 */
function modernStatus(reply: ReplyPayload): number {
  const one = Array.isArray(reply) ? undefined : reply;
  const code = one && 'error' in one ? one.error.code : undefined;
  if (code === ErrorCode.MethodNotFound) return 404;
  if (code === ErrorCode.HeaderMismatch || code === ErrorCode.MissingRequiredClientCapability || code === ErrorCode.UnsupportedProtocolVersion) return 400;
  return 200;
}

/** The permission a single request was refused for (PermissionDenied names it in `data.permission`). */
function deniedPermission(reply: ReplyPayload): Permission | undefined {
  if (reply === undefined || Array.isArray(reply) || !('error' in reply) || reply.error.code !== ErrorCode.PermissionDenied) return undefined;
  const data = reply.error.data as { permission?: unknown } | undefined;
  return typeof data?.permission === 'string' && isPermission(data.permission) ? data.permission : undefined;
}
