/**
 * The transport-free core: a parsed JSON-RPC payload (one message or a batch) goes in, the reply
 * payload (or nothing, for notifications) comes out. Handlers are plain async functions keyed by
 * method name; every error they throw is translated by `toErrorObject`, the one translation.
 */
import { didYouMean } from '../tools/suggest';
import { ErrorCode, ProtocolError, toErrorObject } from './errors';
import { classify, failure, Incoming, JsonRpcId, JsonRpcParams, JsonRpcResponse, nestsDeeperThan, parseJson, success } from './jsonrpc';
import { knownJson } from './known-json';

/** What every handler receives besides its params. `C` is the transport's caller context. */
export interface CallContext<C> {
  caller: C;
  /** Aborted when the request is cancelled or its caller goes away. Made on first read: pass `ctx` itself (a CallSignal) to a runner that may not need it. */
  readonly signal: AbortSignal;
  /**
   * Sends a notification related to this request (progress) while it runs, when the transport
   * can (stdio; HTTP as an event stream). Absent: the transport cannot, and the handler stays quiet.
   */
  notify?: (method: string, params: Record<string, unknown>) => void;
}

/** How a transport sends a request's notifications: given the request's id, a sender (or none). */
export type NotifySink = (id: JsonRpcId) => ((method: string, params: Record<string, unknown>) => void) | undefined;

export type MethodHandler<C> = (params: JsonRpcParams | undefined, ctx: CallContext<C>) => unknown;
export type NotificationHandler<C> = (params: JsonRpcParams | undefined, ctx: { caller: C; inflight: InFlight }) => void;

export interface DispatcherLimits {
  /** Deepest nesting of arrays/objects accepted in one message. */
  maxDepth: number;
  /** Most elements accepted in one batch. */
  maxBatch: number;
}

/**
 * One request's cancellation. Its AbortSignal is made on first use: Node gives every new
 * AbortSignal its prototype one object at a time, a slow path (~4 µs, more than the rest of the
 * dispatch), and most calls finish without anyone looking at their signal (a read_file never
 * does). Aborting before the signal exists is remembered and applied when it is made.
 */
export class RequestCancel {
  private controller: AbortController | undefined;
  private abortedWith: { reason: unknown } | undefined;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.abortedWith !== undefined;
  }

  abort(reason: unknown): void {
    if (this.abortedWith) return;
    this.abortedWith = { reason };
    this.controller?.abort(reason);
  }
}

/** A request's context; `signal` on the prototype, so the request's AbortSignal is made only if read. */
class RequestContext<C> implements CallContext<C> {
  notify?: (method: string, params: Record<string, unknown>) => void;
  constructor(
    readonly caller: C,
    private readonly cancel: RequestCancel,
  ) {}
  get signal(): AbortSignal {
    return this.cancel.signal;
  }
}

/**
 * The requests of one connection that are still running, so `notifications/cancelled` can abort
 * them. A cancelled request gets no reply (MCP: the receiver should not respond).
 */
export class InFlight {
  private readonly running = new Map<JsonRpcId, RequestCancel>();
  /**
   * How to unhook each request from its parent signal, so a long-lived parent gathers no
   * listeners; made on first use (HTTP makes an InFlight per POST and passes no parent).
   */
  private detach: WeakMap<RequestCancel, () => void> | undefined;

  begin(id: JsonRpcId, parent?: AbortSignal): RequestCancel {
    const cancel = new RequestCancel();
    if (parent) {
      if (parent.aborted) cancel.abort(parent.reason);
      else {
        const onAbort = () => cancel.abort(parent.reason);
        parent.addEventListener('abort', onAbort, { once: true });
        (this.detach ??= new WeakMap()).set(cancel, () => parent.removeEventListener('abort', onAbort));
      }
    }
    this.running.set(id, cancel);
    return cancel;
  }
  end(id: JsonRpcId, cancel: RequestCancel): void {
    this.detach?.get(cancel)?.();
    if (this.running.get(id) === cancel) this.running.delete(id);
  }
  cancel(id: JsonRpcId, reason: string): void {
    this.running.get(id)?.abort(new ProtocolError(ErrorCode.Cancelled, `Request cancelled: ${reason}`));
  }
  cancelAll(reason: string): void {
    for (const id of [...this.running.keys()]) this.cancel(id, reason);
  }
  get size(): number {
    return this.running.size;
  }
}

export type ReplyPayload = JsonRpcResponse | JsonRpcResponse[] | undefined;

/** Told of every error that reaches a caller only as "Internal error": its cause must be logged somewhere. */
export type UnexpectedErrorSink = (err: unknown, method: string) => void;

export class Dispatcher<C> {
  constructor(
    private readonly methods: ReadonlyMap<string, MethodHandler<C>>,
    private readonly notifications: ReadonlyMap<string, NotificationHandler<C>>,
    private readonly limits: DispatcherLimits,
    private readonly onUnexpectedError?: UnexpectedErrorSink,
  ) {}

  /** `serialize`, telling this dispatcher's sink of a result that cannot be serialized. */
  serialize(reply: JsonRpcResponse | JsonRpcResponse[]): string {
    return serialize(reply, this.onUnexpectedError);
  }

  /** One frame of text in, the reply text out (undefined: send nothing). */
  async dispatchText(text: string, caller: C, inflight: InFlight, signal?: AbortSignal, notify?: NotifySink): Promise<string | undefined> {
    let payload: unknown;
    try {
      payload = parseJson(text);
    } catch (err) {
      return JSON.stringify(failure(null, toErrorObject(err)));
    }
    const reply = await this.dispatch(payload, caller, inflight, signal, notify);
    return reply === undefined ? undefined : this.serialize(reply);
  }

  /**
   * A parsed payload in, the reply payload out, following JSON-RPC 2.0's batch rules. Not
   * `async`: a single message's promise is handed on as it is (an async function returning a
   * promise adds three microtask turns and a promise per layer).
   */
  dispatch(payload: unknown, caller: C, inflight: InFlight, signal?: AbortSignal, notify?: NotifySink): Promise<ReplyPayload> {
    if (!Array.isArray(payload)) return this.one(payload, caller, inflight, signal, notify);
    return this.batch(payload, caller, inflight, signal, notify);
  }

  private async batch(payload: unknown[], caller: C, inflight: InFlight, signal?: AbortSignal, notify?: NotifySink): Promise<ReplyPayload> {
    if (payload.length === 0) return failure(null, { code: ErrorCode.InvalidRequest, message: 'Invalid Request: empty batch' });
    if (payload.length > this.limits.maxBatch) {
      return failure(null, {
        code: ErrorCode.InvalidRequest,
        message: `Invalid Request: batch of ${payload.length} exceeds the limit of ${this.limits.maxBatch}`,
        data: { limit: this.limits.maxBatch },
      });
    }
    const replies = await Promise.all(payload.map((m) => this.one(m, caller, inflight, signal, notify)));
    const present = replies.filter((r): r is JsonRpcResponse => r !== undefined);
    // A batch of only notifications gets no reply at all, not an empty array.
    return present.length === 0 ? undefined : present;
  }

  /** Not `async` either (see dispatch): a request's promise is returned as it is, anything else settled. */
  private one(message: unknown, caller: C, inflight: InFlight, signal?: AbortSignal, notify?: NotifySink): Promise<JsonRpcResponse | undefined> {
    const m = classify(message);
    if (m.kind === 'request' && !nestsDeeperThan(message, this.limits.maxDepth)) {
      return this.request(m.id, m.method, m.params, caller, inflight, signal, notify?.(m.id));
    }
    return Promise.resolve(this.settled(m, message, caller, inflight));
  }

  /** Every message but a request within the depth limit: answered (or not) at once. */
  private settled(m: Incoming, message: unknown, caller: C, inflight: InFlight): JsonRpcResponse | undefined {
    // Depth is checked per message, before any handler (or JSON.stringify) recurses into it. A
    // too-deep element of a batch gets its own error; the rest of the batch is still served.
    if ((m.kind === 'request' || m.kind === 'notification') && nestsDeeperThan(message, this.limits.maxDepth)) {
      if (m.kind === 'notification') return undefined; // never answered, not even with an error
      return failure(m.id, { code: ErrorCode.InvalidRequest, message: `Invalid Request: nesting deeper than ${this.limits.maxDepth} levels` });
    }
    switch (m.kind) {
      case 'invalid':
        return failure(m.id, { code: ErrorCode.InvalidRequest, message: `Invalid Request: ${m.reason}` });
      case 'response':
        return undefined; // this server sends no requests, so a stray response is ignored
      case 'notification': {
        try {
          this.notifications.get(m.method)?.(m.params, { caller, inflight });
        } catch {
          // Notifications are never answered, not even with an error.
        }
        return undefined;
      }
      case 'request':
        return undefined; // within the depth limit: served by one()
    }
  }

  /** `Method not found: tool/list. Did you mean tools/list?`, as an unknown tool gets its nearest names. */
  private methodNotFound(method: string): string {
    const hint = method.length <= MAX_SUGGESTED_NAME ? didYouMean(method, this.methods.keys()) : '';
    return `Method not found: ${method}${hint ? `.${hint}` : ''}`;
  }

  private async request(
    id: JsonRpcId,
    method: string,
    params: JsonRpcParams | undefined,
    caller: C,
    inflight: InFlight,
    signal?: AbortSignal,
    notify?: (method: string, params: Record<string, unknown>) => void,
  ): Promise<JsonRpcResponse | undefined> {
    const handler = this.methods.get(method);
    if (!handler) return failure(id, { code: ErrorCode.MethodNotFound, message: this.methodNotFound(method) });
    const cancel = inflight.begin(id, signal);
    try {
      // A class, not a literal with a getter (V8 builds those on a slow path, ~0.5 µs each).
      const ctx = new RequestContext(caller, cancel);
      if (notify) ctx.notify = notify;
      const result = await handler(params, ctx);
      if (cancel.aborted) return undefined;
      // JSON.stringify drops an undefined member, which would leave a reply with neither result nor error.
      return success(id, result === undefined ? null : result);
    } catch (err) {
      if (cancel.aborted) return undefined;
      if (!(err instanceof ProtocolError)) this.onUnexpectedError?.(err, method);
      return failure(id, toErrorObject(err));
    } finally {
      inflight.end(id, cancel);
    }
  }
}

/** Names longer than this get no suggestion: the edit distance is quadratic, and no method is near one. */
const MAX_SUGGESTED_NAME = 64;

/**
 * Serializes a reply; a result that cannot be serialized becomes an internal error, not a crash.
 * Each batch element on its own, so one bad result does not turn its neighbours into errors.
 */
export function serialize(reply: JsonRpcResponse | JsonRpcResponse[], onUnexpectedError?: UnexpectedErrorSink): string {
  return Array.isArray(reply) ? `[${reply.map((r) => serializeOne(r, onUnexpectedError)).join(',')}]` : serializeOne(reply, onUnexpectedError);
}

function serializeOne(reply: JsonRpcResponse, onUnexpectedError?: UnexpectedErrorSink): string {
  // A result whose JSON arrived as text (a tool result from the Redis bus) is spliced, not serialized again.
  const known = 'result' in reply ? knownJson(reply.result) : undefined;
  if (known !== undefined) return `{"jsonrpc":"2.0","id":${JSON.stringify(reply.id)},"result":${known}}`;
  try {
    return JSON.stringify(reply);
  } catch (err) {
    onUnexpectedError?.(err, 'serializing a reply');
    return JSON.stringify(failure(reply.id, { code: ErrorCode.InternalError, message: 'Internal error' }));
  }
}
