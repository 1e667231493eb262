/**
 * The floor of the hosted topology, built from bare parts: the processes and hops a toolgate call
 * goes through on BullMQ, with none of toolgate's work in them. An HTTP POST reaches a bare Koa
 * server (the gateway's place), which adds a BullMQ job; a Worker in another process (the
 * executor's place) sends the job over a pipe to a child process (the sandbox agent's place),
 * which reads the 1 KiB file and answers a line of JSON; the worker publishes the text on a reply
 * channel the server subscribes to (toolgate's own reply path, quicker than waitUntilFinished:
 * bench/bus-reply.ts). No auth, MCP, quotas, scheduling, events, audit or schema checks. Bare
 * BullMQ is this without the HTTP hop and the pipe hop (and with waitUntilFinished).
 *
 *   node bullmq-floor.js gateway REDIS_URL QUEUE PORT      (GET /readyz answers 200 once ready)
 *   node bullmq-floor.js worker REDIS_URL QUEUE CONCURRENCY FILE pipe|direct   (direct: no sandbox hop)
 *   node bullmq-floor.js sandbox                            (started by the worker)
 */
import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as readline from 'node:readline';
import { Queue, Worker } from 'bullmq';
import Redis from 'ioredis';
import Koa from 'koa';

const connectionOf = (url: string) => {
  const { hostname, port } = new URL(url);
  return { host: hostname, port: Number(port), maxRetriesPerRequest: null };
};

async function gateway(url: string, name: string, port: number): Promise<void> {
  const connection = connectionOf(url);
  const queue = new Queue(name, { connection });
  const sub = new Redis(connection);
  const waiting = new Map<string, (text: string) => void>();
  sub.on('message', (_channel: string, message: string) => {
    const reply = JSON.parse(message) as { id: string; text: string };
    waiting.get(reply.id)?.(reply.text);
    waiting.delete(reply.id);
  });
  await Promise.all([queue.waitUntilReady(), sub.subscribe(`${name}:reply`)]);
  let n = 0;
  const app = new Koa();
  app.use(async (ctx) => {
    if (ctx.method === 'GET' && ctx.path === '/readyz') {
      ctx.body = { status: 'ready' };
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
    const request = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: unknown; params?: { arguments?: unknown } };
    const jobId = `${process.pid}-${++n}`;
    const text = await new Promise<string>((resolve, reject) => {
      waiting.set(jobId, resolve);
      queue.add('call', { args: request.params?.arguments ?? {} }, { jobId, removeOnComplete: { count: 1000 }, removeOnFail: { count: 1000 } }).catch(reject);
    });
    ctx.type = 'application/json';
    ctx.body = JSON.stringify({ jsonrpc: '2.0', id: request.id ?? null, result: { content: [{ type: 'text', text }] } });
  });
  app.listen(port, '127.0.0.1');
  process.once('SIGTERM', () => {
    sub.disconnect();
    void queue.close().then(() => process.exit(0));
  });
}

/** `hop` is `pipe` (the file is read by a child over a pipe, as by a sandbox agent) or `direct`. */
async function worker(url: string, name: string, concurrency: number, file: string, hop: string): Promise<void> {
  const pending = new Map<number, (text: string) => void>();
  let next = 0;
  const child = hop === 'pipe' ? spawn(process.execPath, [__filename, 'sandbox'], { stdio: ['pipe', 'pipe', 'inherit'] }) : undefined;
  if (child) {
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      const reply = JSON.parse(line) as { id: number; text: string };
      pending.get(reply.id)?.(reply.text);
      pending.delete(reply.id);
    });
  }
  const read = (): Promise<string> =>
    child
      ? new Promise<string>((resolve) => {
          const id = ++next;
          pending.set(id, resolve);
          child.stdin!.write(`${JSON.stringify({ id, path: file })}\n`);
        })
      : fs.readFile(file, 'utf8');
  const connection = new Redis(connectionOf(url));
  const w = new Worker(
    name,
    async (job) => {
      const text = await read();
      await connection.publish(`${name}:reply`, JSON.stringify({ id: job.id, text }));
    },
    { connection, concurrency },
  );
  await w.waitUntilReady();
  process.once('SIGTERM', () => {
    child?.kill();
    void w.close().then(() => process.exit(0));
  });
}

function sandbox(): void {
  readline.createInterface({ input: process.stdin }).on('line', (line) => {
    const request = JSON.parse(line) as { id: number; path: string };
    void fs.readFile(request.path, 'utf8').then((text) => process.stdout.write(`${JSON.stringify({ id: request.id, text })}\n`));
  });
}

const [mode, ...args] = process.argv.slice(2);
if (mode === 'gateway') void gateway(args[0]!, args[1]!, Number(args[2]));
else if (mode === 'worker') void worker(args[0]!, args[1]!, Number(args[2]) || 16, args[3]!, args[4] ?? 'pipe');
else if (mode === 'sandbox') sandbox();
else throw new Error(`unknown mode ${mode}`);
