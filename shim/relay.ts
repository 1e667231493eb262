/**
 * The shim's core: frames from a transport (stdin) go to the gateway one POST each, all in
 * flight at once, and each answer goes back as one frame. `notifications/cancelled` aborts the
 * POST it names. When the agent closes its side, running POSTs may finish within the drain time.
 */
import type { Logger } from '../shared/log';
import { ErrorCode } from '../shared/protocol/errors';
import { failure, JsonRpcId } from '../shared/protocol/jsonrpc';
import { FrameTooLargeError, Transport } from '../shared/transport/transport';
import { answer, PostOutcome } from './answer';
import { FrameInfo, inspectFrame } from './frame';

/** What the relay needs from the gateway side (GatewayClient; a stand-in in tests). */
export interface Gateway {
  readonly where: string;
  post(body: string, signal: AbortSignal, headers?: Record<string, string>, onNotification?: (line: string) => void): Promise<PostOutcome>;
  close(): Promise<void>;
}

export interface RelayOptions {
  /** How long, after the agent closed stdin, running POSTs may still finish. */
  drainMs: number;
  log: Logger;
}

/** One POST and the requests in it, so a cancellation can find it. */
interface Exchange {
  controller: AbortController;
  ids: readonly JsonRpcId[];
  cancelled: Set<JsonRpcId>;
}

export class Relay {
  /** Every running POST, and the ones that carry each request id. */
  private readonly live = new Set<Exchange>();
  private readonly exchanges = new Map<JsonRpcId, Set<Exchange>>();
  private readonly running = new Set<Promise<void>>();
  private readonly closed: Promise<void>;
  private resolveClosed!: () => void;
  private reachable = true;
  private stopping?: Promise<void>;

  constructor(
    private readonly transport: Transport,
    private readonly gateway: Gateway,
    private readonly options: RelayOptions,
  ) {
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
  }

  async start(): Promise<void> {
    this.transport.onmessage = (frame) => this.track(this.relay(frame));
    this.transport.onerror = (err) => {
      if (err instanceof FrameTooLargeError) {
        const reply = failure(null, { code: ErrorCode.MessageTooLarge, message: `Message too large: ${err.message}`, data: { limit: err.limit } });
        this.track(this.transport.send(JSON.stringify(reply)));
      } else this.options.log.error({ err }, 'shim stdio error');
    };
    this.transport.onclose = () => this.resolveClosed();
    await this.transport.start();
  }

  /** Resolves once the agent has closed stdin and running POSTs finished or the drain time ran out. */
  async finished(): Promise<void> {
    await this.closed;
    await this.drain();
    await this.shutdown();
  }

  /** Aborts every running POST now (SIGTERM) and closes. */
  async stop(): Promise<void> {
    await this.shutdown();
  }

  private async relay(frame: string): Promise<void> {
    let payload: unknown;
    try {
      payload = JSON.parse(frame);
    } catch {
      // The gateway would say the same; answering here saves the round trip.
      await this.transport.send(JSON.stringify(failure(null, { code: ErrorCode.ParseError, message: 'Parse error: the message is not valid JSON' })));
      return;
    }
    const info = inspectFrame(payload);
    for (const id of info.cancels) this.cancel(id);
    const exchange = this.begin(info);
    let outcome: PostOutcome;
    try {
      // A streamed call's notifications (progress) reach the agent as they come, before its reply.
      outcome = await this.gateway.post(frame, exchange.controller.signal, info.headers, (line) => this.track(this.transport.send(line)));
    } finally {
      this.end(exchange);
    }
    this.observe(outcome, info);
    const line = answer(info, outcome, this.gateway.where);
    if (line !== undefined) await this.transport.send(line);
  }

  private begin(info: FrameInfo): Exchange {
    const exchange: Exchange = { controller: new AbortController(), ids: info.ids, cancelled: new Set() };
    this.live.add(exchange);
    for (const id of info.ids) {
      let set = this.exchanges.get(id);
      if (!set) this.exchanges.set(id, (set = new Set()));
      set.add(exchange);
    }
    return exchange;
  }

  private end(exchange: Exchange): void {
    this.live.delete(exchange);
    for (const id of exchange.ids) {
      const set = this.exchanges.get(id);
      set?.delete(exchange);
      if (set?.size === 0) this.exchanges.delete(id);
    }
  }

  /**
   * A cancelled request gets no reply (MCP). Its POST is aborted, which tells the gateway too;
   * a batch POST is aborted only once every request in it is cancelled, since the others still
   * await their replies.
   */
  private cancel(id: JsonRpcId): void {
    for (const exchange of this.exchanges.get(id) ?? []) {
      exchange.cancelled.add(id);
      if (exchange.ids.every((i) => exchange.cancelled.has(i))) exchange.controller.abort();
    }
  }

  /** Logs the gateway going away and coming back once each, not once per request. */
  private observe(outcome: PostOutcome, info: FrameInfo): void {
    const { log } = this.options;
    if (outcome.kind === 'cancelled') return;
    if (outcome.kind === 'failed' && (outcome.error.code === ErrorCode.Unavailable || outcome.error.code === ErrorCode.OutcomeUnknown)) {
      if (this.reachable) log.warn({ gateway: this.gateway.where, reason: outcome.error.message }, 'gateway unavailable; answering its requests with errors');
      else log.debug({ reason: outcome.error.message }, 'gateway still unavailable');
      this.reachable = false;
      return;
    }
    if (outcome.kind === 'failed') {
      log.warn({ code: outcome.error.code, reason: outcome.error.message, requests: info.ids.length }, 'POST to the gateway failed');
      return;
    }
    if (!this.reachable) log.info({ gateway: this.gateway.where }, 'gateway reachable again');
    this.reachable = true;
    if (outcome.status < 200 || outcome.status >= 300) log.warn({ status: outcome.status, requests: info.ids.length }, 'the gateway refused a message');
  }

  private track(work: Promise<void>): void {
    const guarded = work.catch((err) => this.options.log.error({ err }, 'shim relay error'));
    this.running.add(guarded);
    void guarded.finally(() => this.running.delete(guarded));
  }

  private async drain(): Promise<void> {
    if (this.running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.drainMs)));
    await Promise.race([Promise.all([...this.running]), timeout]);
    clearTimeout(timer);
    if (this.running.size > 0) this.options.log.warn({ running: this.running.size }, 'stdin closed; abandoning requests still running after the drain time');
  }

  private shutdown(): Promise<void> {
    this.stopping ??= (async () => {
      await this.transport.close(); // no new frames from here on
      // Aborting closes each connection, which is how the gateway learns the calls are abandoned.
      for (const exchange of this.live) exchange.controller.abort();
      await Promise.all([...this.running]);
      await this.gateway.close();
    })();
    return this.stopping;
  }
}
