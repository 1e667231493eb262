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
      closeReason().then((err) => this.failAll(err), () => this.failAll(generic));
    };
  }

  start(): Promise<void> {
    return this.transport.start();
  }

  request(method: string, params: JsonRpcParams | undefined, signal?: AbortSignal): Promise<unknown> {
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
      const message = params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params };
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
    if (m.kind !== 'response' || typeof m.id !== 'number') return;
    if (m.error) {
      const code = KNOWN_CODES.has(m.error.code) ? (m.error.code as ErrorCodeValue) : ErrorCode.InternalError;
      const data = typeof m.error.data === 'object' && m.error.data !== null ? (m.error.data as Record<string, unknown>) : undefined;
      this.settle(m.id, undefined, new ProtocolError(code, String(m.error.message), data));
    } else this.settle(m.id, m.result);
  }

  private settle(id: number, result: unknown, err?: Error): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (err) p.reject(err);
    else p.resolve(result);
  }
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
}
