/**
 * How a result gets back to the waiting gateway: BullMQ's `job.waitUntilFinished(queueEvents)`
 * against a reply channel (the executor publishes the result on the gateway's own pub/sub
 * channel), and the whole toolgate BullMQ bus (`BullMqBus.call`, which uses the reply channel).
 * The worker side always runs in another process, as an executor would; the handler is trivial.
 *
 * Run (not part of the test run; needs /usr/bin/redis-server or REDIS_URL):
 *   npx tsc --outDir dist/bench-build --rootDir . --module commonjs --target es2022 --strict \
 *     --esModuleInterop --skipLibCheck --types node,jest bench/bus-reply.ts && node dist/bench-build/bench/bus-reply.js
 * Options (env): SEQUENTIAL (1000 calls a round), CONCURRENT (10000 calls a round), CALLERS (64),
 * ROUNDS (3), MODES (comma-separated subset), REDIS_URL (else a private redis-server).
 */
import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { Job, Queue, QueueEvents, Worker } from 'bullmq';
import { createBullMqBus } from '../shared/bus/bullmq';
import { loadConfig } from '../shared/config';
import { createLogger } from '../shared/log';
import type { ToolCallJob } from '../shared/bus/bus';
import { startRedis } from '../test/helpers/redis';

type Mode = 'waitUntilFinished' | 'reply-channel' | 'toolgate-bus';
const MODES: Mode[] = ['waitUntilFinished', 'reply-channel', 'toolgate-bus'];
const WORKER_CONCURRENCY = 16;
const log = createLogger('silent');
const config = (url: string) => loadConfig({ TOOLGATE_REDIS_URL: url });

// ---- worker side (a child process) ----

async function worker(mode: Mode, url: string): Promise<void> {
  if (mode === 'toolgate-bus') {
    const bus = await createBullMqBus(config(url), log);
    await bus.consume(async (job) => ({ content: [{ type: 'text', text: String((job.args as { n: number }).n) }] }), { concurrency: WORKER_CONCURRENCY });
  } else {
    const publisher = new Redis(url);
    const w = new Worker(
      `bench-${mode}`,
      async (job: Job<{ n: number; reply?: string }>) => {
        const result = { n: job.data.n };
        if (job.data.reply) await publisher.publish(job.data.reply, JSON.stringify({ id: job.id, result }));
        return result;
      },
      { connection: { url, maxRetriesPerRequest: null }, concurrency: WORKER_CONCURRENCY },
    );
    await w.waitUntilReady();
  }
  process.stdout.write('ready\n');
}

// ---- caller side ----

interface Caller {
  call(n: number): Promise<unknown>;
  close(): Promise<void>;
}

async function caller(mode: Mode, url: string): Promise<Caller> {
  if (mode === 'toolgate-bus') {
    const bus = await createBullMqBus(config(url), log);
    return {
      call: (n) => {
        const now = Date.now();
        const signal = new AbortController().signal; // one per call, as the gateway's requests have
        const job: ToolCallJob = {
          id: randomUUID(),
          tenant: 'bench',
          permissions: ['file:read'],
          tool: 'echo',
          args: { n },
          deadline: now + 30_000,
          startBy: now + 30_000,
        };
        return bus.call(job, signal);
      },
      close: () => bus.close(),
    };
  }
  const connection = { url, maxRetriesPerRequest: null };
  const queue = new Queue(`bench-${mode}`, { connection, defaultJobOptions: { removeOnComplete: { count: 1000 }, removeOnFail: { count: 1000 } } });
  queue.setMaxListeners(0);
  if (mode === 'waitUntilFinished') {
    const events = new QueueEvents(`bench-${mode}`, { connection });
    events.setMaxListeners(0);
    await events.waitUntilReady();
    return {
      call: async (n) => (await queue.add('echo', { n })).waitUntilFinished(events, 30_000),
      close: async () => {
        await events.close();
        await queue.close();
      },
    };
  }
  const channel = `bench-reply:${randomUUID()}`;
  const sub = new Redis(url);
  const waiting = new Map<string, (result: unknown) => void>();
  sub.on('message', (_: string, message: string) => {
    const { id, result } = JSON.parse(message) as { id: string; result: unknown };
    waiting.get(id)?.(result);
    waiting.delete(id);
  });
  await sub.subscribe(channel);
  return {
    call: (n) => {
      const id = randomUUID();
      const reply = new Promise((resolve) => waiting.set(id, resolve));
      return queue.add('echo', { n, reply: channel }, { jobId: id }).then(() => reply);
    },
    close: async () => {
      sub.disconnect();
      await queue.close();
    },
  };
}

async function measure(c: Caller, sequential: number, concurrent: number, callers: number) {
  for (let i = 0; i < 300; i++) await c.call(i); // warm-up
  const times: number[] = [];
  for (let i = 0; i < sequential; i++) {
    const t = process.hrtime.bigint();
    await c.call(i);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  let next = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (next < concurrent) await c.call(next++);
    }),
  );
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return { p50: times[Math.floor(times.length * 0.5)]!, p90: times[Math.floor(times.length * 0.9)]!, perSecond: concurrent / seconds };
}

function spawnWorker(mode: Mode, url: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [__filename, 'worker', mode, url], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => c.toString().includes('ready') && resolve(child));
    child.once('exit', (code) => reject(new Error(`the ${mode} worker exited (${code})`)));
  });
}

async function main(): Promise<void> {
  const sequential = Number(process.env.SEQUENTIAL ?? 1000);
  const concurrent = Number(process.env.CONCURRENT ?? 10_000);
  const callers = Number(process.env.CALLERS ?? 64);
  const rounds = Number(process.env.ROUNDS ?? 3);
  const modes = process.env.MODES ? (process.env.MODES.split(',') as Mode[]) : MODES;
  const redis = process.env.REDIS_URL ? undefined : await startRedis();
  const url = process.env.REDIS_URL ?? redis!.url;
  const ping = new Redis(url);
  const pings: number[] = [];
  for (let i = 0; i < 2000; i++) {
    const t = process.hrtime.bigint();
    await ping.ping();
    pings.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  pings.sort((a, b) => a - b);
  ping.disconnect();

  // All workers stay up and the modes take turns, round after round, so a busy machine
  // (other processes on its two cores) weighs on every mode alike; medians of the rounds.
  const children = await Promise.all(modes.map((mode) => spawnWorker(mode, url)));
  const callersByMode = await Promise.all(modes.map((mode) => caller(mode, url)));
  const results = modes.map(() => [] as Array<{ p50: number; p90: number; perSecond: number }>);
  for (let round = 0; round < rounds; round++) {
    for (let m = 0; m < modes.length; m++) results[m]!.push(await measure(callersByMode[m]!, sequential, concurrent, callers));
  }
  await Promise.all(callersByMode.map((c) => c.close()));
  children.forEach((child) => child.kill('SIGKILL'));
  await redis?.close();

  const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
  const rows = modes.map((mode, m) => ({
    mode,
    p50: median(results[m]!.map((r) => r.p50)),
    p90: median(results[m]!.map((r) => r.p90)),
    perSecond: median(results[m]!.map((r) => r.perSecond)),
  }));
  const base = rows[0]!;
  const lines = [
    `bus reply path: ${rounds} rounds of ${sequential} sequential calls and ${concurrent} calls from ${callers} callers; worker concurrency ${WORKER_CONCURRENCY} in another process; medians`,
    `Redis PING p50 ${pings[pings.length >> 1]!.toFixed(3)} ms`,
    '',
    `| path | p50 ms | p90 ms | p50 vs ${base.mode} | calls/s | calls/s vs ${base.mode} |`,
    '|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.mode} | ${r.p50.toFixed(3)} | ${r.p90.toFixed(3)} | ${(r.p50 / base.p50).toFixed(2)} | ${Math.round(r.perSecond)} | ${(r.perSecond / base.perSecond).toFixed(2)} |`,
    ),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

if (process.argv[2] === 'worker') {
  worker(process.argv[3] as Mode, process.argv[4]!).catch((err) => {
    process.stderr.write(`${String(err)}\n`);
    process.exit(1);
  });
} else {
  main().then(
    () => process.exit(0),
    (err) => {
      process.stderr.write(`${String(err)}\n`);
      process.exit(1);
    },
  );
}
