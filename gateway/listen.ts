/**
 * Puts a Koa app on a socket and takes it off gracefully: on close, new connections are refused,
 * idle keep-alive connections end at once, and running requests get `graceMs` to finish before
 * their connections are cut (which aborts their calls through the disconnect signal).
 */
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';

export interface Listening {
  server: Server;
  /** `http://host:port/`, with the port actually bound (port 0 picks a free one). */
  url: string;
  close(graceMs: number): Promise<void>;
}

export class ListenError extends Error {
  override readonly name = 'ListenError';
}

export async function listen(app: Koa, host: string, port: number): Promise<Listening> {
  const server = createServer(app.callback());
  // A request whose headers or body trickle in is cut off rather than holding a socket forever.
  server.headersTimeout = 30_000;
  server.requestTimeout = 120_000;
  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      const why = err.code === 'EADDRINUSE' ? 'the address is already in use' : err.code === 'EACCES' ? 'permission denied' : err.message;
      reject(new ListenError(`cannot listen on ${host}:${port}: ${why} (set TOOLGATE_HOST / TOOLGATE_PORT)`));
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    server,
    url: `http://${shown}:${address.port}/`,
    close: (graceMs) =>
      new Promise<void>((resolve) => {
        const cut = setTimeout(() => server.closeAllConnections(), graceMs);
        cut.unref();
        server.close(() => {
          clearTimeout(cut);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
