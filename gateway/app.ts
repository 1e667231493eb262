/**
 * The gateway as a Koa app: `POST /` (JSON-RPC), `GET /healthz` (the process is up),
 * `GET /readyz` (the bus can take calls), `GET /metrics` (Prometheus). It never listens and
 * never reads the environment: the composition root hands in everything it needs.
 */
import Koa from 'koa';
import type { Caller } from '../shared/auth/permissions';
import type { Logger } from '../shared/log';
import type { Dispatcher } from '../shared/protocol/dispatcher';
import type { Authenticate } from './auth';
import { errorBoundary, methodNotAllowed, notFound } from './errors';
import { rpcEndpoint } from './http-transport';
import { GatewayMetrics, outcomeOfStatus } from './metrics';

export interface AppDeps {
  dispatcher: Dispatcher<Caller>;
  authenticate: Authenticate;
  /** Whether calls can be taken now (the bus is reachable and the server is not shutting down). */
  ready: () => Promise<boolean>;
  metrics: GatewayMetrics;
  /** Largest request body accepted, in bytes. */
  maxBodyBytes: number;
  log: Logger;
}

const RPC_METHODS = ['POST'] as const;
const READ_METHODS = ['GET', 'HEAD'] as const;

function allow(method: string, allowed: readonly string[]): void {
  if (!allowed.includes(method)) throw methodNotAllowed(allowed);
}

export function createApp(deps: AppDeps): Koa {
  const { metrics, log } = deps;
  const app = new Koa();
  // Every error is answered by the boundary; what escapes it (a socket error) is only logged.
  app.silent = true;
  app.on('error', (err: unknown) => log.debug({ err }, 'gateway connection error'));

  const rpc = rpcEndpoint({ dispatcher: deps.dispatcher, authenticate: deps.authenticate, maxBodyBytes: deps.maxBodyBytes, metrics });

  // Counts every request to the JSON-RPC endpoint by what it came to, refusals included.
  app.use(async (ctx, next) => {
    try {
      await next();
    } finally {
      if (ctx.path === '/') metrics.request(outcomeOfStatus(ctx.status));
    }
  });
  app.use(errorBoundary(log));
  app.use(async (ctx) => {
    switch (ctx.path) {
      case '/':
        allow(ctx.method, RPC_METHODS);
        return rpc(ctx, async () => undefined);
      case '/healthz':
        allow(ctx.method, READ_METHODS);
        ctx.body = { status: 'ok' };
        return;
      case '/readyz': {
        allow(ctx.method, READ_METHODS);
        const ready = await deps.ready().catch(() => false);
        ctx.status = ready ? 200 : 503;
        ctx.body = { status: ready ? 'ready' : 'unavailable' };
        return;
      }
      case '/metrics':
        allow(ctx.method, READ_METHODS);
        ctx.type = metrics.contentType();
        ctx.body = await metrics.render();
        return;
      default:
        throw notFound();
    }
  });
  return app;
}
