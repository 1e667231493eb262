/**
 * Connects one transport to a dispatcher for one caller: frames in, replies out, concurrent
 * requests, cancellation, and a clean drain when the peer goes away. This is where stdio-style
 * transports translate transport failures (an oversized frame) into JSON-RPC errors.
 */
import type { Dispatcher } from '../protocol/dispatcher';
import { InFlight, NotifySink } from '../protocol/dispatcher';
import { ErrorCode } from '../protocol/errors';
import { failure } from '../protocol/jsonrpc';
import { FrameTooLargeError, Transport } from '../transport/transport';

export interface SessionOptions {
  /** How long, after the peer closed its side, running requests may still finish. */
  drainMs: number;
  onInternalError?: (err: unknown) => void;
}

export class Session<C> {
  private readonly inflight = new InFlight();
  private readonly running = new Set<Promise<void>>();
  private readonly closed: Promise<void>;
  private resolveClosed!: () => void;

  constructor(
    private readonly transport: Transport,
    private readonly dispatcher: Dispatcher<C>,
    private readonly caller: C,
    private readonly options: SessionOptions,
  ) {
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
  }

  async start(): Promise<void> {
    this.transport.onmessage = (frame) => this.track(this.handle(frame));
    this.transport.onerror = (err) => {
      if (err instanceof FrameTooLargeError) {
        const reply = failure(null, { code: ErrorCode.MessageTooLarge, message: `Message too large: ${err.message}`, data: { limit: err.limit } });
        this.track(this.transport.send(JSON.stringify(reply)));
      } else this.options.onInternalError?.(err);
    };
    this.transport.onclose = () => this.resolveClosed();
    await this.transport.start();
  }

  /** Resolves when the peer has gone and running requests have finished (or the drain time ran out). */
  async finished(): Promise<void> {
    await this.closed;
    await this.drain(this.options.drainMs);
    await this.transport.close();
  }

  /** Aborts every running request now (SIGTERM), then closes. */
  async stop(): Promise<void> {
    this.inflight.cancelAll('server shutting down');
    await this.transport.close();
  }

  private async handle(frame: string): Promise<void> {
    const reply = await this.dispatcher.dispatchText(frame, this.caller, this.inflight, undefined, this.notifySink);
    if (reply !== undefined) await this.transport.send(reply);
  }

  /** A request's notifications (progress) go out as frames of their own, before its reply. */
  private readonly notifySink: NotifySink = () => (method, params) => this.track(this.transport.send(JSON.stringify({ jsonrpc: '2.0', method, params })));

  private track(work: Promise<void>): void {
    const guarded = work.catch((err) => this.options.onInternalError?.(err));
    this.running.add(guarded);
    void guarded.finally(() => this.running.delete(guarded));
  }

  private async drain(ms: number): Promise<void> {
    if (this.running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
    await Promise.race([Promise.all([...this.running]), timeout]);
    clearTimeout(timer);
    if (this.running.size > 0) this.inflight.cancelAll('the client closed the connection');
  }
}
