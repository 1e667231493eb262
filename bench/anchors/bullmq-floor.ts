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
 * With FLOOR_JWT_SECRET set, the gateway also does the least a call costs under the contract, each
 * part in its cheapest place: the caller's bearer JWT (the spec's HTTP call) verified once per
 * token string (HS256, jsonwebtoken; later calls look the string up), and before the job is added
 * the caller's per-identity limits taken in Redis by one script (a concurrency lease and the
 * minute's counter, atomic, shared by every gateway: DESIGN §7 and the containment work); the
 * worker releases the lease in the same write as its reply. No MCP, scheduling, events, audit or
 * schema checks still.
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
import { verify } from 'jsonwebtoken';
import Koa from 'koa';

const connectionOf = (url: string) => {
  const { hostname, port } = new URL(url);
  return { host: hostname, port: Number(port), maxRetriesPerRequest: null };
};

/** The contract's per-call limit check: a lease under `max` live ones and a call under `perMinute`. */
const LIMITS_SCRIPT = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
local spent = redis.call('INCR', KEYS[2])
if spent == 1 then redis.call('EXPIRE', KEYS[2], 60) end
if spent > tonumber(ARGV[3]) then return -1 end
redis.call('ZADD', KEYS[1], now + 60000, ARGV[4])
redis.call('PEXPIRE', KEYS[1], 60000)
return 1`;

interface ContractRedis extends Redis {
  limits(lease: string, budget: string, now: number, max: number, perMinute: number, id: string): Promise<number>;
}

async function gateway(url: string, name: string, port: number): Promise<void> {
  const connection = connectionOf(url);
  const queue = new Queue(name, { connection });
  const sub = new Redis(connection);
  const secret = process.env.FLOOR_JWT_SECRET;
  const limits = secret ? (new Redis(connection) as ContractRedis) : undefined;
  limits?.defineCommand('limits', { numberOfKeys: 2, lua: LIMITS_SCRIPT });
  const verified = new Map<string, string>();
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
    let identity = '';
    if (secret) {
      const token = (ctx.get('authorization') ?? '').replace(/^Bearer /, '');
      identity = verified.get(token) ?? '';
      if (!identity) verified.set(token, (identity = (verify(token, secret, { algorithms: ['HS256'] }) as { id: string }).id));
    }
    const chunks: Buffer[] = [];
    for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
    const request = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: unknown; params?: { arguments?: unknown } };
    const jobId = `${process.pid}-${++n}`;
    const lease = `floor:calls:${identity}`;
    if (limits && (await limits.limits(lease, `floor:minute:${identity}`, Date.now(), 1_000_000, 1_000_000_000, jobId)) !== 1) ctx.throw(429);
    const text = await new Promise<string>((resolve, reject) => {
      waiting.set(jobId, resolve);
      const data = { args: request.params?.arguments ?? {}, ...(limits ? { lease } : {}) };
      queue.add('call', data, { jobId, removeOnComplete: { count: 1000 }, removeOnFail: { count: 1000 } }).catch(reject);
    });
    ctx.type = 'application/json';
    ctx.body = JSON.stringify({ jsonrpc: '2.0', id: request.id ?? null, result: { content: [{ type: 'text', text }] } });
  });
  app.listen(port, '127.0.0.1');
  process.once('SIGTERM', () => {
    sub.disconnect();
    limits?.disconnect();
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
      const reply = JSON.stringify({ id: job.id, text });
      const { lease } = job.data as { lease?: string };
      // The contract floor's lease goes in the same write as the reply.
      if (lease) await connection.pipeline().zrem(lease, job.id!).publish(`${name}:reply`, reply).exec();
      else await connection.publish(`${name}:reply`, reply);
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
