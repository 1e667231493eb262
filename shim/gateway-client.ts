/**
 * The shim's HTTP side: one POST per frame to the gateway over a keep-alive pool, with the
 * caller's credentials, a whole-exchange deadline and a capped reply. Failures come back as
 * described outcomes, never as throws, so every frame can be answered.
 */
import { Pool } from 'undici';
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';
import { classify } from '../shared/protocol/jsonrpc';
import type { PostOutcome } from './answer';
import { SseParser } from './sse';

export interface GatewayClientOptions {
  /** The gateway's address: http(s), no credentials in it. */
  url: URL;
  /** Sent as `Authorization: Bearer`. */
  token: string;
  /** Sent as `X-API-Key` when set (Caddy in front of the gateway checks it). */
  apiKey?: string;
  /** PEM certificates to trust instead of the system roots (e.g. Caddy's internal CA). */
  ca?: string;
  /** Deadline for one exchange, from sending to the last byte of the reply. */
  timeoutMs: number;
  connectTimeoutMs: number;
  maxReplyBytes: number;
  userAgent: string;
  /** Connections kept to the gateway; POSTs beyond this wait for one (their deadline running). */
  connections?: number;
}

export class GatewayClient {
  /** The gateway as messages name it: origin and path, never a query or credentials. */
  readonly where: string;
  private readonly pool: Pool;
  private readonly path: string;
  private readonly headers: Record<string, string>;

  constructor(private readonly options: GatewayClientOptions) {
    const { url } = options;
    this.where = url.origin + url.pathname;
    this.path = url.pathname + url.search;
    this.headers = {
      authorization: `Bearer ${options.token}`,
      'content-type': 'application/json',
      // The gateway streams a call's progress as events when we read them (a quick call stays JSON).
      accept: 'application/json, text/event-stream',
      'user-agent': options.userAgent,
      ...(options.apiKey === undefined ? {} : { 'x-api-key': options.apiKey }),
    };
    this.pool = new Pool(url.origin, {
      connections: options.connections ?? 64,
      connect: { timeout: options.connectTimeoutMs, ...(options.ca === undefined ? {} : { ca: options.ca }) },
      // One deadline of our own covers headers and body: a tool call may rightly take minutes.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  }

  /**
   * POSTs one frame as it is, with any per-message headers. `signal` is the agent's cancellation.
   * An event-stream answer hands each notification to `onNotification` as it arrives; its final
   * response is the outcome's body.
   */
  async post(body: string, signal: AbortSignal, headers: Record<string, string> = {}, onNotification?: (line: string) => void): Promise<PostOutcome> {
    if (signal.aborted) return { kind: 'cancelled' };
    const stop = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      stop.abort();
    }, this.options.timeoutMs);
    const cancel = () => stop.abort();
    signal.addEventListener('abort', cancel, { once: true });
    try {
      const res = await this.pool.request({ path: this.path, method: 'POST', headers: { ...this.headers, ...headers }, body, signal: stop.signal });
      const type = String(res.headers['content-type'] ?? '');
      const text = type.startsWith('text/event-stream') ? await this.readEvents(res.body, onNotification) : await this.readReply(res.body);
      const retryAfter = res.headers['retry-after'];
      return { kind: 'http', status: res.statusCode, body: text, ...(typeof retryAfter === 'string' ? { retryAfter } : {}) };
    } catch (err) {
      // The deadline and the cancellation come first: what undici throws then is only their echo.
      if (signal.aborted) return { kind: 'cancelled' };
      if (timedOut) return failed(ErrorCode.Timeout, `no reply from the gateway at ${this.where} within ${this.options.timeoutMs} ms`);
      if (err instanceof ProtocolError) return { kind: 'failed', error: err };
      return { kind: 'failed', error: this.describe(err) };
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', cancel);
    }
  }

  /** Closes every connection now; a POST still running fails. */
  async close(): Promise<void> {
    await this.pool.destroy();
  }

  /** The events of a streamed answer: notifications passed on at once, the last response kept. */
  private async readEvents(body: AsyncIterable<Buffer> & { destroy(): void }, onNotification?: (line: string) => void): Promise<string> {
    let reply = '';
    let size = 0;
    const parser = new SseParser((data) => {
      if (data.length > this.options.maxReplyBytes) return;
      // A notification goes on at once (one line: JSON text holds no raw newline); anything else is the answer.
      if (isNotification(data)) onNotification?.(JSON.stringify(JSON.parse(data)));
      else reply = data;
    });
    const decoder = new TextDecoder();
    for await (const chunk of body) {
      size += chunk.length;
      if (size > this.options.maxReplyBytes * 2) {
        body.destroy();
        throw new ProtocolError(ErrorCode.MessageTooLarge, `the gateway at ${this.where} sent a stream larger than ${this.options.maxReplyBytes * 2} bytes`, {
          limit: this.options.maxReplyBytes,
        });
      }
      parser.push(decoder.decode(chunk, { stream: true }));
    }
    parser.push(decoder.decode());
    parser.end();
    return reply;
  }

  private async readReply(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of body) {
      size += chunk.length;
      if (size > this.options.maxReplyBytes) {
        body.destroy();
        throw new ProtocolError(ErrorCode.MessageTooLarge, `the gateway at ${this.where} sent a reply larger than ${this.options.maxReplyBytes} bytes`, {
          limit: this.options.maxReplyBytes,
        });
      }
      chunks.push(chunk);
    }
    return Buffer.concat(chunks, size).toString('utf8');
  }

  private describe(err: unknown): ProtocolError {
    const code = errorCode(err);
    const message = err instanceof Error && err.message !== '' ? err.message : String(code ?? err);
    const at = `the gateway at ${this.where}`;
    if (code === 'UND_ERR_CONNECT_TIMEOUT') {
      return unavailable(`gateway unreachable at ${this.where}: connecting timed out after ${this.options.connectTimeoutMs} ms`);
    }
    // The request may have reached the gateway (a call may be running there): not "did not run".
    if (code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED' || code === 'ECONNRESET' || code === 'EPIPE') {
      return new ProtocolError(
        ErrorCode.OutcomeUnknown,
        `Outcome unknown: the connection to ${at} closed before its reply was complete (${code}); the request may have run`,
      );
    }
    if (code !== undefined && TLS_CODES.test(code)) {
      const hint = CERT_CODES.test(code) ? '; pass --ca FILE to trust a private CA' : '';
      return unavailable(`TLS with ${at} failed: ${message} (${code})${hint}`);
    }
    if (code !== undefined && /^E[A-Z]+$/.test(code)) return unavailable(`gateway unreachable at ${this.where}: ${code}`);
    return unavailable(`gateway unreachable at ${this.where}: ${message}${code === undefined ? '' : ` (${code})`}`);
  }
}

function isNotification(data: string): boolean {
  try {
    return classify(JSON.parse(data)).kind === 'notification';
  } catch {
    return false;
  }
}

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|EPROTO$|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|HOSTNAME_MISMATCH)/;
const CERT_CODES = /^(DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_UNTRUSTED)/;

const failed = (code: typeof ErrorCode.Timeout, message: string): PostOutcome => ({ kind: 'failed', error: new ProtocolError(code, message) });
const unavailable = (message: string) => new ProtocolError(ErrorCode.Unavailable, message);

/** The error's code, looking through happy-eyeballs AggregateErrors and `cause`. */
function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e !== null && typeof e === 'object' && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const inner = (e as { errors?: unknown[] }).errors;
    e = Array.isArray(inner) && inner.length > 0 ? inner[0] : (e as { cause?: unknown }).cause;
  }
  return undefined;
}
