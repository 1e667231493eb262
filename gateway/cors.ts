/**
 * CORS for browser-based OAuth clients, on the OAuth endpoint and its metadata only. The origin
 * guard (origin-guard.ts) runs first, so any Origin that reaches here is on the allow-list
 * (TOOLGATE_ALLOWED_ORIGINS): it is echoed, the headers a client must read are exposed (a 401's
 * challenge among them), and a preflight is answered here. `POST /` stays without CORS, as before.
 */
import type { Middleware } from 'koa';

const ALLOW_HEADERS = 'Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Session-Id, Last-Event-ID';
const EXPOSE_HEADERS = 'WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version, Retry-After';

export function cors(paths: ReadonlySet<string>): Middleware {
  return async (ctx, next) => {
    if (!paths.has(ctx.path)) return next();
    // Always: a shared cache must not hand a reply without CORS headers to a browser.
    ctx.vary('Origin');
    const origin = ctx.get('Origin');
    if (origin === '') return next();
    ctx.set('Access-Control-Allow-Origin', origin);
    ctx.set('Access-Control-Expose-Headers', EXPOSE_HEADERS);
    if (ctx.method === 'OPTIONS' && ctx.get('Access-Control-Request-Method') !== '') {
      ctx.set('Access-Control-Allow-Methods', 'GET, POST, OPTIONS');
      ctx.set('Access-Control-Allow-Headers', ALLOW_HEADERS);
      ctx.set('Access-Control-Max-Age', '600');
      ctx.status = 204;
      return;
    }
    await next();
  };
}
