/**
 * Puts a Koa app on a socket and takes it off gracefully: on close, new connections are refused,
 * idle keep-alive connections end at once, a request arriving on a busy keep-alive connection is
 * refused before any work starts (503, Unavailable, `Connection: close`), and running requests
 * get `graceMs` to finish before their connections are cut (which aborts their calls through the
 * disconnect signal). Refusing late arrivals matters: otherwise a caller that sends back to back
 * keeps its connection busy until the cut, losing replies of calls that already ran.
 */
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';
import { ErrorCode } from '../shared/protocol/errors';
import { failure } from '../shared/protocol/jsonrpc';

const STARTING = JSON.stringify(failure(null, { code: ErrorCode.Unavailable, message: 'Unavailable: the gateway is starting; retry shortly' }));
const SHUTTING_DOWN = JSON.stringify(failure(null, { code: ErrorCode.Unavailable, message: 'Unavailable: the gateway is shutting down; retry shortly' }));

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
  return (await bind(host, port)).serve(app);
}

/** A socket bound before the app that serves it exists: `serve` starts answering; until then, 503. */
export interface Bound {
  serve(app: Koa): Listening;
  /** Gives the address back (start-up failed before `serve`). */
  close(): Promise<void>;
}

/**
 * Binds first: `serve` takes the port before it starts an executor, so a second process on a busy
 * port fails before it touches anything (the data directory's mounts) another process holds.
 */
export async function bind(host: string, port: number): Promise<Bound> {
  let handle: ReturnType<Koa['callback']> | undefined;
  let closing = false;
  const server = createServer((req, res) => {
    if (handle && !closing) return void handle(req, res);
    res.writeHead(503, { 'content-type': 'application/json', connection: 'close', 'retry-after': '1' });
    res.end(handle ? SHUTTING_DOWN : STARTING);
  });
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
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
    serve: (app) => {
      handle = app.callback();
      return {
        server,
        url: `http://${shown}:${address.port}/`,
        close: (graceMs) =>
          new Promise<void>((resolve) => {
            closing = true;
            const cut = setTimeout(() => server.closeAllConnections(), graceMs);
            cut.unref();
            server.close(() => {
              clearTimeout(cut);
              resolve();
            });
            server.closeIdleConnections();
          }),
      };
    },
  };
}
