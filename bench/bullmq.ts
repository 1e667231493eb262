/**
 * bullmq: the hosted path on a real Redis — HTTP POST → `toolgate serve` (gateway) → BullMQ →
 * `toolgate executor` (another process) → the tenant's sandbox → back — against a bare BullMQ
 * round trip on the same Redis: Queue.add → a Worker in another process with a trivial handler
 * (concurrency 16, the executor's default) → job.waitUntilFinished. Sequential and 64 callers.
 */
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import type { Queue as QueueT, QueueEvents as QueueEventsT } from 'bullmq';
import { sign } from 'jsonwebtoken';
import { alternate, Side } from './lib/alternate';
import { concurrent, sequential } from './lib/plan';
import { canRunRedis } from './lib/availability';
import { hasProduct, REPO_ROOT } from './lib/product';
import { busCall, productBus } from './lib/bus';
import { BenchRedis, commandsPerCall, startRedis } from './lib/redis';
import { FILE_1K, makeFixture } from './lib/fixtures';
import { processTree } from './lib/rss';
import { rpcClient, RpcHttpClient } from './lib/http-client';
import { baseEnv, freePort, Service, startService, waitForHttp } from './lib/services';
import { startToolgate, ToolgateStack } from './lib/toolgate';
import type { Benchmark, BenchContext, Row } from './lib/types';

const WORKER = path.join(REPO_ROOT, 'dist-bench/bench/anchors/bullmq-worker.js');
const FLOOR = path.join(REPO_ROOT, 'dist-bench/bench/anchors/bullmq-floor.js');
const FLOOR_QUEUE = 'bench-floor';
const BUS_CONSUMER = path.join(REPO_ROOT, 'dist-bench/bench/anchors/bus-consumer.js');
const BARE_QUEUE = 'bench-bare';

export interface BareBullMq {
  worker: Service;
  call(): Promise<unknown>;
  close(): Promise<void>;
}

export interface FloorStack {
  gateway: Service;
  worker: Service;
  url: string;
  /** The headers its callers send (a bearer token when it checks one). */
  headers: Record<string, string>;
  close(): Promise<void>;
}

/**
 * The topology's floor from bare parts (anchors/bullmq-floor.ts): bare Koa → BullMQ → a Worker →
 * a pipe to a child that reads the file. It is our path's processes and hops with none of our work.
 * With `contract`, its gateway also verifies a bearer JWT and takes per-identity limits in Redis
 * per call: the least any server meeting the contract does on this path.
 */
export async function startFloor(redisUrl: string, pipeHop: boolean, contract = false): Promise<FloorStack> {
  const fixture = await makeFixture('toolgate-bench-floor-');
  const port = await freePort();
  const queue = contract ? `${FLOOR_QUEUE}-contract` : FLOOR_QUEUE;
  // Only the contract floor checks a token: its secret and its callers' header.
  const secret = contract ? randomBytes(32).toString('hex') : undefined;
  const headers: Record<string, string> = secret
    ? { authorization: `Bearer ${sign({ id: 'bench', permissions: ['file:read'] }, secret, { algorithm: 'HS256', expiresIn: '1d' })}` }
    : {};
  const worker = startService(
    contract ? 'contract floor worker' : 'floor worker',
    process.execPath,
    [FLOOR, 'worker', redisUrl, queue, '16', path.join(fixture.root, FILE_1K), pipeHop ? 'pipe' : 'direct'],
    baseEnv({}),
  );
  const gateway = startService(
    contract ? 'contract floor gateway (bare Koa + JWT + limits)' : 'floor gateway (bare Koa)',
    process.execPath,
    [FLOOR, 'gateway', redisUrl, queue, String(port)],
    baseEnv(secret ? { FLOOR_JWT_SECRET: secret } : {}),
  );
  const close = async () => {
    await gateway.stop();
    await worker.stop();
    await fixture.remove();
  };
  try {
    await waitForHttp(gateway, `http://127.0.0.1:${port}/readyz`);
  } catch (err) {
    await close();
    throw err;
  }
  return { gateway, worker, url: `http://127.0.0.1:${port}/`, headers, close };
}

/** The anchor: a queue here, a trivial worker in its own process, one result awaited per call. */
export async function startBareBullMq(redisUrl: string): Promise<BareBullMq> {
  const { Queue, QueueEvents } = await import('bullmq');
  const { hostname, port } = new URL(redisUrl);
  const connection = { host: hostname, port: Number(port), maxRetriesPerRequest: null };
  const worker = startService('bare BullMQ worker', process.execPath, [WORKER, redisUrl, BARE_QUEUE, '16'], baseEnv({}));
  const queue: QueueT = new Queue(BARE_QUEUE, { connection });
  const events: QueueEventsT = new QueueEvents(BARE_QUEUE, { connection });
  queue.setMaxListeners(0);
  events.setMaxListeners(0);
  await Promise.all([queue.waitUntilReady(), events.waitUntilReady()]);
  let n = 0;
  // removeOnComplete:true breaks waitUntilFinished (ENVIRONMENT.md): keep a bounded count instead.
  const call = async () => {
    const job = await queue.add('call', { n: ++n }, { removeOnComplete: { count: 1000 }, removeOnFail: { count: 1000 } });
    return job.waitUntilFinished(events, 30_000);
  };
  await call(); // the worker is up
  return {
    worker,
    call,
    close: async () => {
      await events.close();
      await queue.close();
      await worker.stop();
    },
  };
}

export const bullmqBench: Benchmark = {
  name: 'bullmq',
  title: 'HTTP through BullMQ: gateway + executor processes on a real Redis vs a bare BullMQ round trip',
  async unavailable() {
    if (!hasProduct('shared/bus/bullmq')) return 'the BullMQ bus is not in this build (shared/bus/bullmq.ts)';
    return canRunRedis();
  },
  async run(ctx: BenchContext): Promise<Row[]> {
    let redis: BenchRedis | undefined;
    let stack: ToolgateStack | undefined;
    let bare: BareBullMq | undefined;
    let floor: FloorStack | undefined;
    let contractFloor: FloorStack | undefined;
    const rows: Row[] = [];
    try {
      redis = await startRedis();
      stack = await startToolgate({ redisUrl: redis.url });
      bare = await startBareBullMq(redis.url);
      // The floor has the sandbox hop when our executor has one (an agent process under it).
      const pipeHop = processTree(stack.executors[0]!.pid).length > 1;
      floor = await startFloor(redis.url, pipeHop);
      contractFloor = await startFloor(redis.url, pipeHop, true);
      const sandbox = process.env.TOOLGATE_BENCH_SANDBOX ?? 'none';
      // Not timed: how many Redis commands one call costs each side.
      const counter = stack.client(1);
      const commands = {
        ours: await commandsPerCall(redis.url, () => stack!.readFile(counter), 200),
        theirs: await commandsPerCall(redis.url, () => bare!.call(), 200),
      };
      await counter.close();
      ctx.log(`bullmq: Redis commands per call: ours ${commands.ours}; bare ${commands.theirs}`);
      for (const callers of [1, 64]) {
        const seq = callers === 1;
        const client = stack.client(callers);
        const floorClient = rpcClient(floor.url, floor.headers, callers);
        const contractClient = rpcClient(contractFloor.url, contractFloor.headers, callers);
        const options = seq ? sequential(ctx) : concurrent(ctx, callers);
        ctx.log(`bullmq: ${callers} caller(s), ${options.calls} calls per side`);
        const s = stack;
        const b = bare;
        const r = redis;
        const ours: Side = {
          label: `HTTP → gateway → BullMQ → executor → ${sandbox} sandbox, read_file`,
          call: () => s.readFile(client),
          pids: () => [s.gateway.pid, ...s.executors.map((e) => e.pid)],
          cpuPids: () => [r.service.pid],
        };
        const theirs: Side = {
          label: 'bare BullMQ add → worker (trivial) → waitUntilFinished',
          call: () => b.call(),
          pids: () => [b.worker.pid],
          cpuPids: () => [r.service.pid],
        };
        /** A floor stack as a side: its gateway and worker are its processes; `gateway` says what its gateway does per call. */
        const floorSide = (f: FloorStack, floorCaller: RpcHttpClient, gateway: string): Side => ({
          label: `bare parts in our topology: ${gateway} → BullMQ → worker → ${pipeHop ? 'pipe to a child reading' : 'reading'} the file`,
          call: () => floorCaller.call('read_file', { path: FILE_1K }),
          pids: () => [f.gateway.pid, f.worker.pid],
          cpuPids: () => [r.service.pid],
        });
        const bottom = floorSide(floor, floorClient, 'bare Koa');
        const contractBottom = floorSide(contractFloor, contractClient, "bare Koa + the contract's JWT verify + per-identity limits in Redis");
        try {
          const [o, t, fl, cfl] = await alternate([ours, theirs, bottom, contractBottom], options);
          rows.push({
            bench: 'bullmq',
            case: `read_file 1 KiB via Redis, ${seq ? 'sequential' : `${callers} callers`}`,
            ours: { label: `toolgate gateway + executor (${sandbox})`, summary: o! },
            theirs: { label: 'bare BullMQ round trip', summary: t! },
            concurrency: callers,
            target: seq ? { metric: 'p50-ratio', op: '<=', value: 1.5 } : { metric: 'throughput-ratio', op: '>=', value: 0.5 },
            note: seq
              ? `ours includes the HTTP hop and the sandbox hop; RSS: gateway + executor + agent, theirs: the worker process (its queue client runs in the bench); CPU µs/call includes redis-server on both sides; Redis commands per call: ours ${commands.ours}, bare ${commands.theirs}`
              : undefined,
          });
          rows.push({
            bench: 'bullmq',
            case: `topology floor: bare parts, read_file via Redis, ${seq ? 'sequential' : `${callers} callers`}`,
            ours: { label: `bare Koa → BullMQ → worker${pipeHop ? ' → pipe child' : ''} (no toolgate code)`, summary: fl! },
            theirs: { label: 'bare BullMQ round trip', summary: t! },
            concurrency: callers,
            note: seq
              ? "diagnosis, same rounds as the row above: our processes and hops (HTTP, the worker's pipe to a child) built from bare parts, with toolgate's pub/sub reply; floor ÷ bare is what the topology alone costs, ours ÷ floor what toolgate's own work costs"
              : undefined,
          });
          rows.push({
            bench: 'bullmq',
            case: `contract floor: bare parts + JWT + limits, read_file via Redis, ${seq ? 'sequential' : `${callers} callers`}`,
            ours: {
              label: `bare Koa + a cached JWT check + one limits script per call → BullMQ → worker (releasing in its reply's write)${pipeHop ? ' → pipe child' : ''}`,
              summary: cfl!,
            },
            theirs: { label: 'bare BullMQ round trip', summary: t! },
            concurrency: callers,
            note: seq
              ? "diagnosis, same rounds: the floor above plus the least per-call work the contract asks of any server on this path (the spec's bearer JWT, verified once per token string; per-identity concurrency and per-minute limits shared by every gateway through Redis, taken atomically by one script before the job, released in the worker's reply write); contract floor ÷ bare bounds what any conforming server can reach here"
              : undefined,
          });
        } finally {
          await client.close();
          await floorClient.close();
          await contractClient.close();
        }
      }
      // The bus alone: toolgate's Bus.call → a trivial consumer in another process (no HTTP, no sandbox).
      await stack.close();
      stack = undefined;
      await floor.close();
      floor = undefined;
      await contractFloor.close();
      contractFloor = undefined;
      const consumer = startService('toolgate bus consumer (trivial)', process.execPath, [BUS_CONSUMER, redis.url], baseEnv({}));
      const bus = await productBus(redis.url);
      try {
        await busCall(bus);
        for (const callers of [1, 64]) {
          const seq = callers === 1;
          const options = seq ? sequential(ctx) : concurrent(ctx, callers);
          ctx.log(`bullmq: bus only, ${callers} caller(s)`);
          const b = bare;
          const r = redis;
          const [o, t] = await alternate(
            [
              { label: 'toolgate Bus.call → consumer (trivial)', call: () => busCall(bus), pids: () => [consumer.pid], cpuPids: () => [r.service.pid] },
              { label: 'bare BullMQ round trip', call: () => b.call(), pids: () => [b.worker.pid], cpuPids: () => [r.service.pid] },
            ],
            options,
          );
          rows.push({
            bench: 'bullmq',
            case: `bus only, trivial handler, ${seq ? 'sequential' : `${callers} callers`}`,
            ours: { label: 'toolgate BullMQ bus (Bus.call → consume)', summary: o! },
            theirs: { label: 'bare BullMQ round trip', summary: t! },
            concurrency: callers,
            note: seq ? 'diagnosis: the bus by itself, both callers in the bench process; RSS: the consumer / worker process' : undefined,
          });
        }
      } finally {
        await bus.close();
        await consumer.stop();
      }
      return rows;
    } finally {
      await bare?.close().catch(() => undefined);
      await floor?.close().catch(() => undefined);
      await contractFloor?.close().catch(() => undefined);
      await stack?.close().catch(() => undefined);
      await redis?.close().catch(() => undefined);
    }
  },
};
