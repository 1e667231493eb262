/**
 * The sandbox's one way out: a TCP listener on the sandbox's own loopback (127.0.0.1:PORT, the
 * address its commands get as HTTP_PROXY and friends) that pipes each connection, byte for byte,
 * to the executor's egress proxy on the Unix socket bind-mounted into this sandbox only
 * (executor/egress/proxy.ts). The relay reads nothing: the proxy decides, attributing every
 * connection to the tenant whose socket it arrived on. The sandbox has no other route and no
 * DNS, so a program that ignores the proxy variables has no network at all.
 *
 * node:net only: the agent stays small (DESIGN.md: its memory target).
 */
import * as net from 'node:net';

export interface EgressRelay {
  readonly port: number;
  close(): Promise<void>;
}

const READ_BYTES = 64 * 1024;

/**
 * Connects to the proxy and relays what it sends to `client`. The download direction reads into
 * one buffer of the connection's own (`onread`) rather than a new 64 KiB one per read: a quarter
 * of the reads and callbacks, and no garbage, so a download does not grow the agent. The buffer
 * is refilled only once the client's socket has taken all of the last read.
 */
function connectUpstream(socketPath: string, client: net.Socket): net.Socket {
  let waiting = false;
  const written = (): void => {
    if (!waiting) return;
    waiting = false;
    upstream.resume();
  };
  const upstream = net.connect({
    path: socketPath,
    allowHalfOpen: true,
    onread: {
      buffer: Buffer.allocUnsafe(READ_BYTES),
      callback(bytes: number, buffer: Uint8Array): boolean {
        client.write(buffer.subarray(0, bytes), written);
        if (client.writableLength === 0) return true;
        waiting = true;
        return false;
      },
    },
  });
  return upstream;
}

/** Relays `client` and `upstream` both ways until either side is done with them. */
function splice(client: net.Socket, upstream: net.Socket): void {
  client.pipe(upstream);
  upstream.once('end', () => client.end());
  // A destination that closes unpipes its source and leaves it paused: bytes the client still
  // sends (curl's TLS close_notify after the proxy closed) would sit unread and its connection
  // never end. Drain the source so it sees its own end.
  upstream.once('close', () => client.resume());
  client.once('close', () => upstream.resume());
  // An abrupt end on one side ends the other; a graceful one passes through as a half-close.
  client.on('error', () => upstream.destroy());
  upstream.on('error', () => client.destroy());
}

/** Listens on 127.0.0.1:`port` (0: any free port) and relays to the proxy at `socketPath`. */
export async function startEgressRelay(socketPath: string, port: number): Promise<EgressRelay> {
  const sockets = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
    const upstream = connectUpstream(socketPath, client);
    track(client);
    track(upstream);
    splice(client, upstream);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
