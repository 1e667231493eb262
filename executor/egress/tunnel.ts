/**
 * CONNECT host:port: after the channel's checks, a byte tunnel to the checked address. Nothing
 * is parsed inside it (TLS stays end to end); each direction is counted, a half-close passes
 * through, and an abrupt close or an idle one takes both sides down.
 */
import * as http from 'node:http';
import type * as net from 'node:net';
import { normalizeTargetHost } from './rules';
import { Reach, Refusal, relay, Target } from './upstream';

const READ_BYTES = 64 * 1024;

/** host:port of a CONNECT, normalized; undefined when it is not one (also read by the secrets' interception). */
export function parseAuthority(authority: string): Target | undefined {
  const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(authority);
  const host = m ? normalizeTargetHost(m[1] ?? '') : undefined;
  const port = Number(m?.[2]);
  return host !== undefined && port >= 1 && port <= 65535 ? { host, port } : undefined;
}

/** The whole answer to a CONNECT refused with `refusal`: the status and the one line, then the connection closes. */
export const connectRefusal = ({ status, line }: Refusal): string =>
  `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(line) + 1}\r\nconnection: close\r\n\r\n${line}\n`;

/** Answers one CONNECT the sandbox sent to the proxy. */
export async function tunnelConnect(req: http.IncomingMessage, client: net.Socket, head: Buffer, reach: Reach, idleTimeoutMs: number): Promise<void> {
  client.on('error', () => undefined);
  const target = parseAuthority(req.url ?? '');
  const answer = (status: number, line: string) => client.end(connectRefusal({ status, line }));
  if (!target) return void answer(400, 'toolgate egress: CONNECT needs host:port');
  // The download direction reads into one buffer of the tunnel's own instead of a new one per
  // read (less work per byte, no garbage), refilled once the client's socket has taken the last.
  let waiting = false;
  const written = (): void => {
    if (!waiting) return;
    waiting = false;
    upstream.resume();
  };
  const onread: net.OnReadOpts = {
    buffer: Buffer.allocUnsafe(READ_BYTES),
    callback(bytes, buffer) {
      if (!lease.add('in', bytes)) {
        cut();
        return false;
      }
      client.write(buffer.subarray(0, bytes), written);
      if (client.writableLength === 0) return true;
      waiting = true;
      return false;
    },
  };
  const reached = await reach(target, onread);
  if ('line' in reached) return void answer(reached.status, reached.line);
  const { upstream, lease } = reached;
  let firstError: string | undefined;
  let open = 2;
  const cut = () => {
    client.destroy();
    upstream.destroy();
  };
  for (const [a, b] of [
    [client, upstream],
    [upstream, client],
  ] as const) {
    a.on('error', (err: NodeJS.ErrnoException) => (firstError ??= err.code ?? err.message));
    // A graceful close has passed its end on through relay; anything else takes the other side down.
    a.once('close', (hadError) => {
      if (hadError || !a.readableEnded) b.destroy();
      if (--open === 0) lease.close(firstError, { in: upstream.bytesRead, out: upstream.bytesWritten });
    });
  }
  client.setTimeout(idleTimeoutMs, cut);
  client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  if (head.length > 0) {
    if (!lease.add('out', head.length)) return cut();
    upstream.write(head);
  }
  relay(client, upstream, (n) => lease.add('out', n), cut);
  upstream.once('end', () => client.end());
  upstream.resume();
}
