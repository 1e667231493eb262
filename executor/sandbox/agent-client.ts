/**
 * The executor's side of the channel to one sandbox agent, read as untrusted input. The agent is
 * our code, but it runs inside the tenant's sandbox, and the executor serves every tenant: so a
 * broken or subverted agent must be able to fail only its own tenant's calls. Every frame must be
 * a JSON-RPC reply (`jsonrpc`, a numeric `id`, exactly one of `result`/`error`) to a call still
 * pending — or to one the executor cancelled, whose late reply is dropped — or a
 * `notifications/progress` with a numeric token and a string message (handed to the call it names;
 * dropped once that call is over, since the agent coalesces progress on a timer), or a
 * `toolgate/processEnded` naming a process handle (handed to `onProcessEnded`), within the byte and
 * value caps of reply-limits.ts, parsed off the event loop when large (frame-parser.ts). The first
 * frame that is not is a violation: every pending call fails with its description and
 * `onViolation` ends the sandbox; nothing more is read.
 */
import { ErrorCode, ErrorCodeValue, ProtocolError } from '../../shared/protocol/errors';
import type { Transport } from '../../shared/transport/transport';
import { FrameTooLargeError } from '../../shared/transport/transport';
import { CANCELLED, PROCESS_ENDED, PROGRESS } from '../agent/protocol';
import { ranMaybe } from './backend';
import { FrameRefused, parseFrame } from './frame-parser';
import type { ReplyLimits } from './reply-limits';

interface Pending {
  resolve(result: unknown): void;
  reject(err: Error): void;
  /** Checks a result's shape; returns why it is wrong, or undefined. */
  check?: (result: unknown) => string | undefined;
  /** Receives the `message` of the agent's `notifications/progress` for this call. */
  onProgress?: (message: string) => void;
}

export interface RequestOptions {
  check?: Pending['check'];
  /** With it, the request carries `_meta.progressToken` (its own id) and the agent's progress for it is handed on. */
  onProgress?: (message: string) => void;
}

/** Cancelled calls whose late reply is still welcome; beyond this many, the oldest are forgotten. */
const MAX_ABANDONED = 4096;

const KNOWN_CODES: ReadonlySet<number> = new Set(Object.values(ErrorCode));

export interface AgentClientOptions extends ReplyLimits {
  /** Called once, on the first violation, with a sentence saying what the agent did. */
  onViolation(reason: string): void;
  /** Receives the handle of each start_process process the agent reports ended (PROCESS_ENDED). */
  onProcessEnded?(handle: string): void;
}

/** The longest process handle a tool accepts (process-info.ts), so the longest the agent may report. */
const MAX_HANDLE_CHARS = 64;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export class AgentClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** Ids of calls cancelled here: the agent may still answer each one once. Insertion-ordered. */
  private readonly abandoned = new Set<number>();
  private failure: Error | undefined;
  private violated = false;

  constructor(
    private readonly transport: Transport,
    private readonly options: AgentClientOptions,
    closeReason: () => Promise<Error>,
  ) {
    transport.onmessage = (frame) => this.onFrame(frame);
    transport.onerror = (err) => {
      if (err instanceof FrameTooLargeError) this.violation(`it sent a message larger than ${options.maxFrameBytes} bytes, the most any reply can need`);
      // Stream errors show as the agent's exit, reported through closeReason.
    };
    transport.onclose = () => {
      closeReason().then(
        (err) => this.failAll(err),
        () => this.failAll(new ProtocolError(ErrorCode.Unavailable, 'Sandbox unavailable: the agent closed its channel')),
      );
    };
  }

  start(): Promise<void> {
    return this.transport.start();
  }

  /** A call to the agent. `check`, if given, vets the result's shape (a wrong shape is a violation). */
  request(method: string, params: Record<string, unknown> | undefined, signal?: AbortSignal, options: RequestOptions = {}): Promise<unknown> {
    const { check, onProgress } = options;
    if (this.failure) return Promise.reject(this.failure);
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const onAbort = () => {
        if (!this.pending.delete(id)) return;
        this.abandon(id);
        void this.send({ jsonrpc: '2.0', method: CANCELLED, params: { requestId: id, reason: 'cancelled by the caller' } });
        reject(abortReason(signal!));
      };
      const done = () => signal?.removeEventListener('abort', onAbort);
      this.pending.set(id, {
        resolve: (r) => (done(), resolve(r)),
        reject: (e) => (done(), reject(e)),
        check,
        onProgress,
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      const sent = onProgress ? { ...params, _meta: { ...(isObject(params?._meta) ? params._meta : {}), progressToken: id } } : params;
      const message = sent === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params: sent };
      this.send(message).catch((err: Error) => this.settle(id, undefined, err));
    });
  }

  /**
   * Fails every later call with `err` (it never reaches the agent) and every pending one with
   * `err` made OutcomeUnknown: the agent had it, so its tool may have run, in whole or in part.
   */
  failAll(err: Error): void {
    this.failure ??= err;
    if (this.pending.size === 0) return;
    const inFlight = ranMaybe(this.failure);
    for (const [id, p] of [...this.pending]) {
      this.pending.delete(id);
      p.reject(inFlight);
    }
  }

  get inFlight(): number {
    return this.pending.size;
  }

  private send(message: unknown): Promise<void> {
    if (this.failure) return Promise.resolve();
    return this.transport.send(JSON.stringify(message));
  }

  private abandon(id: number): void {
    this.abandoned.add(id);
    if (this.abandoned.size > MAX_ABANDONED) this.abandoned.delete(this.abandoned.values().next().value as number);
  }

  private onFrame(frame: string): void {
    if (this.violated) return;
    parseFrame(frame, this.options.maxValues).then(
      (value) => this.onMessage(value),
      (err: unknown) => this.violation(`it sent a message the executor refused: ${err instanceof FrameRefused ? err.message : 'it could not be parsed'}`),
    );
  }

  private onMessage(value: unknown): void {
    if (this.violated) return;
    if (!isObject(value) || value.jsonrpc !== '2.0') return this.violation('it sent something other than a JSON-RPC reply');
    if ('method' in value) {
      if (value.method === PROCESS_ENDED && !('id' in value)) {
        const params = value.params;
        if (!isObject(params) || typeof params.handle !== 'string' || params.handle.length === 0 || params.handle.length > MAX_HANDLE_CHARS)
          return this.violation('it sent a malformed process-ended notification');
        this.options.onProcessEnded?.(params.handle);
        return;
      }
      if (value.method !== PROGRESS || 'id' in value) return this.violation('it sent something other than a JSON-RPC reply');
      const params = value.params;
      if (!isObject(params) || typeof params.progressToken !== 'number' || typeof params.message !== 'string')
        return this.violation('it sent a malformed progress notification');
      this.pending.get(params.progressToken)?.onProgress?.(params.message);
      return;
    }
    const id = value.id;
    const hasResult = 'result' in value;
    const hasError = 'error' in value;
    if (typeof id !== 'number' || hasResult === hasError) return this.violation('it sent a malformed reply');
    const p = this.pending.get(id);
    if (!p) {
      if (this.abandoned.delete(id)) return; // a late answer to a call cancelled here
      return this.violation(`it sent a reply to no pending call (id ${id}): unsolicited, or a second reply`);
    }
    if (hasError) {
      const e = value.error;
      if (!isObject(e) || typeof e.code !== 'number' || typeof e.message !== 'string') return this.violation('it sent a malformed error');
      const code = KNOWN_CODES.has(e.code) ? (e.code as ErrorCodeValue) : ErrorCode.InternalError;
      const data = isObject(e.data) ? e.data : undefined;
      return this.settle(id, undefined, new ProtocolError(code, e.message, data));
    }
    const wrong = p.check?.(value.result);
    if (wrong) return this.violation(`it sent a reply that is not a tool result (${wrong})`);
    this.settle(id, value.result);
  }

  private settle(id: number, result: unknown, err?: Error): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (err) p.reject(err);
    else p.resolve(result);
  }

  private violation(reason: string): void {
    if (this.violated) return;
    this.violated = true;
    this.failAll(
      new ProtocolError(ErrorCode.Unavailable, `Sandbox ended: its agent broke the executor's protocol (${reason}); the next call starts a new sandbox`),
    );
    this.options.onViolation(reason);
  }
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
}

/** A tools/call result's shape, as far as the executor relies on it. */
export function checkToolResult(result: unknown): string | undefined {
  if (!isObject(result)) return 'not an object';
  if (!Array.isArray(result.content)) return 'no content array';
  if ('isError' in result && typeof result.isError !== 'boolean') return 'isError is not a boolean';
  if ('structuredContent' in result && !isObject(result.structuredContent)) return 'structuredContent is not an object';
  return undefined;
}
