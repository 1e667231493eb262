/**
 * A small real HTTP(S) server on 127.0.0.1 that plays the toolgate gateway for shim tests: it
 * records every POST (headers, exact body, whether the client hung up before the reply) and
 * answers through a handler a test can swap. The default handler answers like the gateway: a
 * JSON-RPC reply per request (echoing method and params), 202 with no body for notifications.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';

export interface Seen {
  headers: http.IncomingHttpHeaders;
  method: string;
  url: string;
  body: string;
  /** The client closed the connection before the reply was sent (a cancel or a timeout). */
  abandoned: boolean;
  /** The reply was sent in full. */
  answered: boolean;
}

export type Handler = (seen: Seen, res: http.ServerResponse) => void;

export interface TlsFiles {
  key: string;
  cert: string;
}

export class TestGateway {
  readonly seen: Seen[] = [];
  handler: Handler = answerLikeGateway;

  private constructor(
    private readonly server: http.Server,
    readonly port: number,
    readonly url: string,
  ) {}

  /** Listens on `port` (0: any free one). */
  static async start(options: { port?: number; tls?: TlsFiles } = {}): Promise<TestGateway> {
    let gateway: TestGateway | undefined;
    const listener = (req: http.IncomingMessage, res: http.ServerResponse) => gateway!.receive(req, res);
    const server = options.tls ? https.createServer({ key: options.tls.key, cert: options.tls.cert }, listener) : http.createServer(listener);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', resolve);
    });
    const port = (server.address() as AddressInfo).port;
    gateway = new TestGateway(server, port, `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}/`);
    return gateway;
  }

  /** Stops listening and drops every connection, kept-alive ones included: the gateway is down. */
  async stop(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  /** Resolves with the first recorded POST that matches, waiting for it to arrive. */
  async waitFor(match: (s: Seen) => boolean, what = 'a matching POST', timeoutMs = 10_000): Promise<Seen> {
    return until(() => this.seen.find(match), `the gateway to see ${what}`, timeoutMs);
  }

  private receive(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const seen: Seen = {
        headers: req.headers,
        method: req.method ?? '',
        url: req.url ?? '',
        body: Buffer.concat(chunks).toString('utf8'),
        abandoned: false,
        answered: false,
      };
      res.on('close', () => {
        if (res.writableFinished) seen.answered = true;
        else seen.abandoned = true;
      });
      this.seen.push(seen);
      this.handler(seen, res);
    });
  }
}

/** Sends a JSON body with `status`. */
export function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

/** The gateway's behaviour in miniature: each request answered with its id, notifications with 202. */
export function answerLikeGateway(seen: Seen, res: http.ServerResponse): void {
  const reply = jsonRpcReplies(seen.body, (m) => ({ method: m.method, params: m.params ?? null }));
  if (reply === undefined) {
    res.writeHead(202);
    res.end();
  } else sendJson(res, 200, reply);
}

export interface RequestMessage {
  id: string | number | null;
  method: string;
  params?: unknown;
}

/** Builds the reply to a posted body with `result(message)` per request; undefined when there are none. */
export function jsonRpcReplies(body: string, result: (m: RequestMessage) => unknown): unknown {
  const payload: unknown = JSON.parse(body);
  const messages = (Array.isArray(payload) ? payload : [payload]) as Array<Record<string, unknown>>;
  const replies = messages.filter((m) => 'id' in m).map((m) => ({ jsonrpc: '2.0', id: m.id, result: result(m as unknown as RequestMessage) }));
  if (replies.length === 0) return undefined;
  return Array.isArray(payload) ? replies : replies[0];
}

/** Polls `probe` until it yields a value; fails with `what` when `timeoutMs` passes first. */
export async function until<T>(probe: () => T | undefined, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export { freePort } from '../helpers/ports';
