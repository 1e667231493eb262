/**
 * The gateway as a Koa app: `POST /` (JSON-RPC; one such endpoint per authenticator, see
 * auth/index.ts), `GET /healthz` (the process is up), `GET /readyz` (the bus can take calls),
 * `GET /metrics` (Prometheus). It never listens and never reads the environment: the
 * composition root hands in everything it needs.
 */
import Router from '@koa/router';
import Koa, { type Middleware } from 'koa';
import type { Caller } from '../shared/auth/permissions';
import type { Logger } from '../shared/log';
import type { Dispatcher } from '../shared/protocol/dispatcher';
import type { Authenticators } from './auth/authenticator';
import type { BodyCost } from './body-cost';
import { errorBoundary, methodNotAllowed, notFound } from './errors';
import { rpcEndpoint } from './http-transport';
import { GatewayMetrics, outcomeOfStatus } from './metrics';
import { cors } from './cors';
import { OriginPolicy, originGuard } from './origin-guard';
import { refusalLog } from './refusal-log';

export interface AppDeps {
  dispatcher: Dispatcher<Caller>;
  /** The JSON-RPC endpoints: each path → the authenticator of its callers (auth/index.ts). */
  authenticators: Authenticators;
  /**
   * Whether calls can be served now (the bus is reachable, every shard has an executor, the
   * server is not shutting down): true, or false or the reason why not (/readyz shows it).
   */
  ready: () => Promise<boolean | string>;
  metrics: GatewayMetrics;
  /** Largest request body accepted, in bytes. */
  maxBodyBytes: number;
  /** Which browser origins and Host names may reach the gateway (DNS-rebinding defence). */
  origins: OriginPolicy;
  /** Per-identity body cost limits (bytes in flight, elements). */
  bodyCost?: BodyCost;
  log: Logger;
}

export function createApp(deps: AppDeps): Koa {
  const { metrics, log } = deps;
  const app = new Koa();
  // Every error is answered by the boundary; what escapes it (a socket error) is only logged.
  app.silent = true;
  app.on('error', (err: unknown) => log.debug({ err }, 'gateway connection error'));

  const endpoints = new Map<string, Middleware>();
  /** GET documents beside an endpoint (OAuth metadata), and the paths browsers may reach with CORS. */
  const documents = new Map<string, unknown>();
  const corsPaths = new Set<string>();
  for (const [path, authenticator] of Object.entries(checkEndpoints(deps.authenticators))) {
    endpoints.set(path, rpcEndpoint({ dispatcher: deps.dispatcher, authenticator, maxBodyBytes: deps.maxBodyBytes, bodyCost: deps.bodyCost, metrics }));
    if (!authenticator.documents) continue;
    corsPaths.add(path);
    for (const [docPath, doc] of Object.entries(authenticator.documents)) {
      documents.set(docPath, doc);
      corsPaths.add(docPath);
    }
  }

  // Counts every request to a JSON-RPC endpoint by what it came to, refusals included.
  app.use(async (ctx, next) => {
    try {
      await next();
    } finally {
      if (endpoints.has(ctx.path)) metrics.request(outcomeOfStatus(ctx.status));
    }
  });
  app.use(refusalLog(log));
  app.use(errorBoundary(log));
  app.use(originGuard(deps.origins));
  if (corsPaths.size > 0) app.use(cors(corsPaths));
  // The router answers unknown paths and wrong methods without a body; give those replies the
  // same JSON-RPC error bodies as every other refusal.
  app.use(async (ctx, next) => {
    await next();
    if (ctx.body !== undefined && ctx.body !== null) return;
    if (ctx.status === 405 || ctx.status === 501) throw methodNotAllowed((ctx.response.get('Allow') || 'POST').split(/,\s*/));
    if (ctx.status === 404) throw notFound();
  });

  const answer = async () => undefined;
  // Every tool call's path skips the router, which matches each route's pattern and composes a
  // middleware chain for every request it routes (~10 µs per call on this path). The route stays
  // registered below, so `allowedMethods` still answers `GET /` with 405 and `Allow: POST`.
  app.use((ctx, next) => {
    const rpc = ctx.method === 'POST' ? endpoints.get(ctx.path) : undefined;
    return rpc ? rpc(ctx, answer) : next();
  });
  const router = new Router();
  for (const [path, rpc] of endpoints) router.post(path, (ctx) => rpc(ctx, answer));
  for (const [path, doc] of documents) {
    router.get(path, (ctx) => {
      ctx.set('Cache-Control', 'public, max-age=3600');
      ctx.body = doc;
    });
  }
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    const ready = await deps.ready().catch(() => false);
    ctx.status = ready === true ? 200 : 503;
    ctx.body = ready === true ? { status: 'ready' } : { status: 'unavailable', ...(typeof ready === 'string' ? { reason: ready } : {}) };
  });
  router.get('/metrics', async (ctx) => {
    ctx.type = metrics.contentType();
    ctx.body = await metrics.render();
  });
  app.use(router.routes());
  app.use(router.allowedMethods());
  return app;
}

/** The app's own routes, which no JSON-RPC endpoint may take. */
const FIXED_ROUTES: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);
const ENDPOINT_PATH = /^\/[A-Za-z0-9._~-]*(\/[A-Za-z0-9._~-]+)*$/;

/** Fails at start, with a sentence, on an endpoint list the app could not route as meant. */
function checkEndpoints(authenticators: Authenticators): Authenticators {
  const paths = Object.keys(authenticators);
  if (paths.length === 0) throw new TypeError('the gateway needs at least one JSON-RPC endpoint: authenticators is empty');
  for (const path of paths) {
    if (!ENDPOINT_PATH.test(path)) throw new TypeError(`endpoint path "${path}" must be "/" or "/name" (letters, digits, ".", "_", "~", "-")`);
    if (FIXED_ROUTES.has(path)) throw new TypeError(`endpoint path "${path}" is taken by the gateway's own ${path.slice(1)} route`);
  }
  return authenticators;
}
