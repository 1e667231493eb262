/**
 * The HTTP floor for `http-embedded`: a bare Koa server that takes the same JSON-RPC POST, reads
 * the same 1 KiB file and answers a JSON-RPC result — no auth, no MCP, no bus, no sandbox. What
 * toolgate adds over it is the price of everything else.
 *
 *   node koa-floor.js PORT FILE       (GET /readyz answers 200 once listening)
 */
import { promises as fs } from 'node:fs';
import Koa from 'koa';

async function main(): Promise<void> {
  const port = Number(process.argv[2]);
  const file = process.argv[3]!;
  const app = new Koa();
  app.use(async (ctx) => {
    if (ctx.method === 'GET' && ctx.path === '/readyz') {
      ctx.body = { status: 'ready' };
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
    const request = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: unknown };
    const text = await fs.readFile(file, 'utf8');
    ctx.type = 'application/json';
    ctx.body = JSON.stringify({ jsonrpc: '2.0', id: request.id ?? null, result: { content: [{ type: 'text', text }] } });
  });
  app.listen(port, '127.0.0.1');
  process.once('SIGTERM', () => process.exit(0));
}

void main();
