/**
 * The calling side of JSON-RPC over any Transport: numbered requests, replies matched by id,
 * cancellation (`notifications/cancelled`), and every pending call failed at once when the peer
 * goes away, so a caller never waits forever.
 */
import type { Transport } from '../transport/transport';
import { ErrorCode, ErrorCodeValue, ProtocolError } from './errors';
import { classify, JsonRpcParams } from './jsonrpc';

interface Pending {
  resolve(result: unknown): void;
  reject(err: Error): void;
  /** Receives the `message` of `notifications/progress` naming this request's token. */
  onProgress?: (message: string) => void;
}

const KNOWN_CODES: ReadonlySet<number> = new Set(Object.values(ErrorCode));

export class JsonRpcClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private failure: Error | undefined;

  /**
   * @param closeReason explains why the peer went away (e.g. the process's exit status), so
   *   pending calls fail with that instead of a bare "connection closed".
   */
  constructor(
    private readonly transport: Transport,
    closeReason?: () => Promise<Error>,
  ) {
    transport.onmessage = (frame) => this.onFrame(frame);
    transport.onclose = () => {
      const generic = new ProtocolError(ErrorCode.Unavailable, 'the peer closed the connection');
      if (!closeReason) return this.failAll(generic);
      closeReason().then(
        (err) => this.failAll(err),
        () => this.failAll(generic),
      );
    };
  }

  start(): Promise<void> {
    return this.transport.start();
  }

  /**
   * Sends a request and resolves with its result. With `onProgress`, the request carries
   * `_meta.progressToken` (its own id) and the peer's `notifications/progress` for it are handed on.
   */
  request(method: string, params: JsonRpcParams | undefined, signal?: AbortSignal, onProgress?: (message: string) => void): Promise<unknown> {
    if (this.failure) return Promise.reject(this.failure);
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const onAbort = () => {
        if (!this.pending.delete(id)) return;
        void this.notify('notifications/cancelled', { requestId: id, reason: 'cancelled by the caller' });
        reject(abortReason(signal!));
      };
      this.pending.set(id, {
        ...(onProgress ? { onProgress } : {}),
        resolve: (r) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(r);
        },
        reject: (e) => {
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      const sent = onProgress ? withProgressToken(params, id) : params;
      const message = sent === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params: sent };
      this.transport.send(JSON.stringify(message)).catch((err: Error) => this.settle(id, undefined, err));
    });
  }

  notify(method: string, params?: JsonRpcParams): Promise<void> {
    if (this.failure) return Promise.resolve();
    const message = params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params };
    return this.transport.send(JSON.stringify(message)).catch(() => undefined);
  }

  /** Fails every pending call (and all later ones) with `err`: the peer is gone. */
  failAll(err: Error): void {
    this.failure ??= err;
    for (const [id, p] of [...this.pending]) {
      this.pending.delete(id);
      p.reject(this.failure);
    }
  }

  get inFlight(): number {
    return this.pending.size;
  }

  close(): Promise<void> {
    return this.transport.close();
  }

  private onFrame(frame: string): void {
    let value: unknown;
    try {
      value = JSON.parse(frame);
    } catch {
      return; // not ours to answer: a client ignores what it cannot read
    }
    const m = classify(value);
    if (m.kind === 'notification' && m.method === 'notifications/progress') return this.onProgress(m.params);
    if (m.kind !== 'response' || typeof m.id !== 'number') return;
    if (m.error) {
      const code = KNOWN_CODES.has(m.error.code) ? (m.error.code as ErrorCodeValue) : ErrorCode.InternalError;
      const data = typeof m.error.data === 'object' && m.error.data !== null ? (m.error.data as Record<string, unknown>) : undefined;
      this.settle(m.id, undefined, new ProtocolError(code, String(m.error.message), data));
    } else this.settle(m.id, m.result);
  }

  private onProgress(params: JsonRpcParams | undefined): void {
    if (params === undefined || Array.isArray(params)) return;
    const { progressToken, message } = params;
    if (typeof progressToken !== 'number' || typeof message !== 'string') return;
    this.pending.get(progressToken)?.onProgress?.(message);
  }

  private settle(id: number, result: unknown, err?: Error): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (err) p.reject(err);
    else p.resolve(result);
  }
}

function withProgressToken(params: JsonRpcParams | undefined, id: number): JsonRpcParams {
  const base = params === undefined || Array.isArray(params) ? {} : params;
  const meta = typeof base._meta === 'object' && base._meta !== null ? base._meta : {};
  return { ...base, _meta: { ...meta, progressToken: id } };
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
}
