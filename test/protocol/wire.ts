/**
 * A client's raw view of a toolgate server: frames out, parsed replies in. Implemented in memory
 * (test/protocol/memory-peer.ts) and over the real stdio binary (test/stdio/server.ts), so the
 * JSON-RPC and MCP suites run unchanged against both.
 */
import type { Permission } from '../../shared/auth/permissions';

export interface WirePeer {
  /** Sends one frame (one JSON text; the stdio peer adds the newline). */
  send(frame: string): Promise<void>;
  /** The next reply, parsed. Rejects when none arrives in time or it is not JSON. */
  next(timeoutMs?: number): Promise<unknown>;
  /** Disconnects and releases everything the peer started. */
  close(): Promise<void>;
}

export interface PeerOptions {
  /** The caller's permissions (default: all). */
  permissions?: readonly Permission[];
}

export type PeerFactory = (options?: PeerOptions) => Promise<WirePeer>;

export interface Reply {
  jsonrpc: '2.0';
  id: string | number | null;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

/** Replies arrive here as text; `next` hands them out in order. */
export class ReplyQueue {
  private readonly frames: string[] = [];
  private waiter?: () => void;

  push(frame: string): void {
    this.frames.push(frame);
    this.waiter?.();
  }

  get buffered(): number {
    return this.frames.length;
  }

  async next(timeoutMs = 5000): Promise<unknown> {
    if (this.frames.length === 0) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          this.waiter = undefined;
          reject(new Error(`no reply within ${timeoutMs} ms`));
        }, timeoutMs);
        this.waiter = () => {
          clearTimeout(timer);
          this.waiter = undefined;
          resolve();
        };
      });
    }
    const frame = this.frames.shift()!;
    try {
      return JSON.parse(frame);
    } catch {
      throw new Error(`reply is not JSON: ${frame.slice(0, 200)}`);
    }
  }
}

/**
 * Checks that a value is exactly a JSON-RPC 2.0 Response object: `jsonrpc`, `id`, and either
 * `result` or `error` (never both), with an integer code and a string message.
 */
export function asResponse(value: unknown): Reply {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`not a response object: ${JSON.stringify(value)}`);
  const r = value as Record<string, unknown>;
  const keys = Object.keys(r).sort();
  const ok =
    r.jsonrpc === '2.0' &&
    'id' in r &&
    (typeof r.id === 'string' || typeof r.id === 'number' || r.id === null) &&
    'result' in r !== 'error' in r &&
    keys.every((k) => ['jsonrpc', 'id', 'result', 'error'].includes(k));
  if (!ok) throw new Error(`not a JSON-RPC 2.0 response: ${JSON.stringify(value).slice(0, 300)}`);
  if ('error' in r) {
    const e = r.error as Record<string, unknown>;
    if (typeof e !== 'object' || e === null || !Number.isInteger(e.code) || typeof e.message !== 'string') {
      throw new Error(`malformed error object: ${JSON.stringify(e)}`);
    }
    if (!Object.keys(e).every((k) => ['code', 'message', 'data'].includes(k))) throw new Error(`extra keys in error object: ${JSON.stringify(e)}`);
  }
  return r as unknown as Reply;
}

/** The next reply, checked to be a single Response object. */
export async function nextResponse(peer: WirePeer, timeoutMs?: number): Promise<Reply> {
  return asResponse(await peer.next(timeoutMs));
}

/** The next reply, checked to be a batch (an array of Response objects). */
export async function nextBatch(peer: WirePeer, timeoutMs?: number): Promise<Reply[]> {
  const value = await peer.next(timeoutMs);
  if (!Array.isArray(value)) throw new Error(`expected a batch reply, got ${JSON.stringify(value).slice(0, 300)}`);
  return value.map(asResponse);
}

let requestSeq = 0;

/** Sends a request with a fresh id and returns its reply (checked to carry that id). */
export async function call(peer: WirePeer, method: string, params?: unknown, timeoutMs?: number): Promise<Reply> {
  const id = `req-${++requestSeq}`;
  const message: Record<string, unknown> = { jsonrpc: '2.0', id, method };
  if (params !== undefined) message.params = params;
  await peer.send(JSON.stringify(message));
  const reply = await nextResponse(peer, timeoutMs);
  if (reply.id !== id) throw new Error(`expected the reply to ${id}, got ${JSON.stringify(reply).slice(0, 300)}`);
  return reply;
}

/**
 * Sends a `ping` and returns every reply that arrived before the ping's own. Used after input
 * that must get no reply (notifications), and to show the server is still serving.
 */
export async function probe(peer: WirePeer, timeoutMs?: number): Promise<unknown[]> {
  const id = `probe-${++requestSeq}`;
  await peer.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' }));
  const before: unknown[] = [];
  for (;;) {
    const value = await peer.next(timeoutMs);
    const r = value as Partial<Reply> | null;
    if (r !== null && typeof r === 'object' && !Array.isArray(r) && r.id === id) {
      if (JSON.stringify(r.result) !== '{}') throw new Error(`ping answered with ${JSON.stringify(r)}`);
      return before;
    }
    before.push(value);
  }
}
