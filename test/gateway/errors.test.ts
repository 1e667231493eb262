/**
 * The one error → HTTP mapping: a bug anywhere in a request becomes 500 with a bare JSON-RPC
 * "Internal error" (the details go to the log only), and the server keeps serving.
 */
import pino from 'pino';
import { createApp } from '../../gateway/app';
import { toHttpReply } from '../../gateway/errors';
import { listen } from '../../gateway/listen';
import { GatewayMetrics } from '../../gateway/metrics';
import { TokenExpired } from '../../shared/auth/token-errors';
import { createMcpServer } from '../../shared/mcp/server';
import { ToolRegistry } from '../../shared/tools/registry';

test('an unexpected error: 500, "Internal error", nothing of it in the reply, logged; the next request is served', async () => {
  const logged: string[] = [];
  const log = pino({ level: 'error' }, { write: (line: string) => void logged.push(line) });
  let explode = true;
  const app = createApp({
    dispatcher: createMcpServer({
      registry: new ToolRegistry([]),
      runner: { run: async () => ({ content: [] }), close: async () => undefined },
      limits: { maxDepth: 64, maxBatch: 10 },
    }),
    authenticators: {
      '/': {
        authenticate: async () => {
          if (explode) throw new Error('db password is hunter2 at /etc/secret');
          return { tenant: 'a', permissions: new Set() };
        },
      },
    },
    ready: async () => true,
    metrics: new GatewayMetrics({ queueTimeoutMs: 1000, processMetrics: false }),
    maxBodyBytes: 1024,
    origins: { allowedOrigins: [], allowedHosts: [], listenHost: '127.0.0.1' },
    log,
  });
  const server = await listen(app, '127.0.0.1', 0);
  try {
    const post = () => fetch(server.url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
    const res = await post();
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32603, message: 'Internal error' } });
    expect(text).not.toContain('hunter2');
    expect(logged.join('\n')).toContain('hunter2');
    explode = false;
    expect((await post()).status).toBe(200);
  } finally {
    await server.close(0);
  }
});

test('toHttpReply: token errors → 401 with a challenge; anything unknown → 500', () => {
  const expired = toHttpReply(new TokenExpired('token has expired'));
  expect(expired).toMatchObject({ status: 401, unexpected: false, body: { error: { code: -32008, message: 'Unauthenticated: token has expired' } } });
  expect(expired.headers['WWW-Authenticate']).toBe('Bearer realm="toolgate", error="invalid_token", error_description="token has expired"');
  expect(toHttpReply('a string')).toMatchObject({ status: 500, unexpected: true, body: { error: { code: -32603 } } });
});
