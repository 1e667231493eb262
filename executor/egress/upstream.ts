/**
 * The proxy's two moves on the wire: connecting to addresses that were already checked (never a
 * name, so what was checked is what is reached) and relaying bytes one way while counting them
 * against the tenant's day, dropping the chunk that would pass it.
 */
import * as net from 'node:net';
import type { Readable, Writable } from 'node:stream';
import type { EgressLease } from './accounting';

/** Where a client asked to go: a normalized host (name or address) and a port. */
export interface Target {
  host: string;
  port: number;
}
/** A refusal or failure to answer with: the HTTP status and the one-line body. */
export interface Refusal {
  status: number;
  line: string;
}
/**
 * Checks, takes a slot and connects (the channel's one path to the network): the connected
 * upstream socket and its lease, or the refusal to answer with. With `onread`, the socket reads
 * into that buffer and calls its callback instead of emitting 'data', and starts paused: it
 * reads nothing until `resume()`.
 */
export type Reach = (target: Target, onread?: net.OnReadOpts) => Promise<{ upstream: net.Socket; lease: EgressLease } | Refusal>;

/** host:port as a client writes it, IPv6 in brackets. */
export const shown = ({ host, port }: Target): string => `${host.includes(':') ? `[${host}]` : host}:${port}`;

/** Connection failures after which the next address of the same host is worth trying. */
const TRY_NEXT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ETIMEDOUT']);

/** Connects to the first of `addresses` (all checked) that answers on `port`; rejects with the last error. */
export function connectChecked(addresses: readonly string[], port: number, timeoutMs: number, onread?: net.OnReadOpts): Promise<net.Socket> {
  const attempt = (i: number): Promise<net.Socket> =>
    new Promise<net.Socket>((resolve, reject) => {
      const socket = net.connect({ host: addresses[i] as string, port, noDelay: true, ...(onread ? { onread } : {}) });
      // Paused before it connects, it does not start reading when it does.
      if (onread) socket.pause();
      const fail = (err: Error) => {
        socket.destroy();
        reject(err);
      };
      socket.setTimeout(timeoutMs, () => fail(Object.assign(new Error(`connect timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' })));
      socket.once('error', fail);
      socket.once('connect', () => {
        socket.setTimeout(0);
        socket.off('error', fail);
        resolve(socket);
      });
    }).catch((err: NodeJS.ErrnoException) => {
      if (i + 1 < addresses.length && TRY_NEXT.has(err.code ?? '')) return attempt(i + 1);
      throw err;
    });
  return attempt(0);
}

/**
 * Copies `from` to `to` with backpressure; `count(bytes)` is asked before each chunk and a false
 * answer calls `cut` instead of writing it. `from` ending ends `to` (a half-close passes through).
 */
export function relay(from: Readable, to: Writable, count: (bytes: number) => boolean, cut: () => void): void {
  from.on('data', (chunk: Buffer) => {
    if (!count(chunk.length)) {
      cut();
      return;
    }
    if (!to.write(chunk)) from.pause();
  });
  to.on('drain', () => from.resume());
  from.once('end', () => to.end());
}
