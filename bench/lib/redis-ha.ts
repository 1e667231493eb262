/**
 * Redis under failover for the fault tests and `npm run load -- --faults`, from Debian's
 * binaries on free 127.0.0.1 ports, no persistence:
 * - `startSentinelGroup()`: one master, one replica and three `redis-sentinel` watching it
 *   (quorum 2, down after 1 s);
 * - `startRedisCluster()`: three masters with a replica each (`redis-cli --cluster create`,
 *   node timeout 1 s).
 * `killMaster()` SIGKILLs (by pid) the master that holds toolgate's keys and resolves once a
 * replica has been promoted in its place, with both times, so a test can measure the stall from
 * the promotion. Every process is stopped by its pid on `close()`. Lives in bench/lib so that
 * test/ (test/helpers/redis.ts, the fault suites) and bench/ share it; it needs no jest.
 */
import { ChildProcess, execFile, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import Redis from 'ioredis';
import type { RedisConfig } from '../../shared/redis-config';
import { REDIS_SERVER } from './availability';
import { freePort } from './services';

export const REDIS_SENTINEL = '/usr/bin/redis-sentinel';
export const REDIS_CLI = '/usr/bin/redis-cli';
const MASTER_NAME = 'toolgate';

export interface RedisHa {
  readonly topology: 'sentinel' | 'cluster';
  /** The TOOLGATE_REDIS_* variables for a toolgate process. */
  readonly env: Record<string, string>;
  readonly config: RedisConfig;
  /** The port of the master holding toolgate's keys now. */
  masterPort(): Promise<number>;
  /** SIGKILLs that master; resolves once a replica has taken its place (performance.now() times). */
  killMaster(): Promise<{ killedAt: number; promotedAt: number; oldPort: number; newPort: number }>;
  /** Every process's last stderr lines, for a failing test's message. */
  logs(): string;
  close(): Promise<void>;
}

interface Proc {
  port: number;
  child: ChildProcess;
  exited: Promise<void>;
  stderr(): string;
}

class Processes {
  readonly all = new Map<number, Proc>();
  constructor(readonly dir: string) {}

  async start(bin: string, port: number, args: string[]): Promise<Proc> {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const keep = (chunk: Buffer) => (out = (out + chunk.toString()).slice(-4000));
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const proc: Proc = { port, child, exited, stderr: () => out };
    this.all.set(port, proc);
    const gone = exited.then(() => {
      throw new Error(`${path.basename(bin)} on port ${port} exited during start-up: ${out.trim().slice(-1000)}`);
    });
    await Promise.race([waitForPong(port, 10_000, true), gone]);
    gone.catch(() => undefined);
    return proc;
  }

  async kill(port: number): Promise<void> {
    const proc = this.all.get(port);
    if (!proc) throw new Error(`no process on port ${port}`);
    process.kill(proc.child.pid!, 'SIGKILL');
    await proc.exited;
    this.all.delete(port);
  }

  logs(): string {
    return [...this.all.values()].map((p) => `--- :${p.port}\n${p.stderr().trim().slice(-1500)}`).join('\n');
  }

  async close(): Promise<void> {
    for (const proc of this.all.values()) {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
      await proc.exited;
    }
    this.all.clear();
    await fs.rm(this.dir, { recursive: true, force: true });
  }
}

/** One command to one node, on a connection of its own (never retried). */
export async function adminCall(port: number, ...args: string[]): Promise<unknown> {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await client.call(args[0]!, ...args.slice(1));
  } finally {
    client.disconnect();
  }
}

const dataArgs = (port: number, dir: string) => [
  '--port',
  String(port),
  '--bind',
  '127.0.0.1',
  '--save',
  '',
  '--appendonly',
  'no',
  '--dir',
  dir,
  '--loglevel',
  'warning',
];

/** Polls `probe` until it returns a value (a rejection counts as none yet); throws after `timeoutMs`. */
export async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, everyMs = 20): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Runs `start` with a fresh set of processes under a temporary directory; on a failure they are all stopped. */
async function withProcesses<T>(prefix: string, start: (procs: Processes) => Promise<T>): Promise<T> {
  const procs = new Processes(await fs.mkdtemp(path.join(os.tmpdir(), prefix)));
  try {
    return await start(procs);
  } catch (err) {
    await procs.close();
    throw err;
  }
}

/** One redis-server with more arguments (an ACL `--user`, TLS ports), on a free port. */
export async function startRedisServer(extraArgs: (dir: string) => string[]): Promise<{ port: number; close(): Promise<void> }> {
  return withProcesses('tg-redis-', async (procs) => {
    const port = await freePort();
    await procs.start(REDIS_SERVER, port, [...dataArgs(port, procs.dir), ...extraArgs(procs.dir)]);
    return { port, close: () => procs.close() };
  });
}

export async function startSentinelGroup(): Promise<RedisHa> {
  return withProcesses('tg-sentinel-', async (procs) => {
    const [master, replica] = [await freePort(), await freePort()];
    await procs.start(REDIS_SERVER, master, dataArgs(master, procs.dir));
    await procs.start(REDIS_SERVER, replica, [...dataArgs(replica, procs.dir), '--replicaof', '127.0.0.1', String(master)]);
    await until('the replica to sync', 10_000, async () =>
      /master_link_status:up/.test(String(await adminCall(replica, 'INFO', 'replication'))) ? true : undefined,
    );
    const sentinels: number[] = [];
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const conf = path.join(procs.dir, `sentinel-${port}.conf`);
      await fs.writeFile(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${procs.dir}`,
          `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${master} 2`,
          `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
          `sentinel failover-timeout ${MASTER_NAME} 10000`,
          `sentinel parallel-syncs ${MASTER_NAME} 1`,
          '',
        ].join('\n'),
      );
      await procs.start(REDIS_SENTINEL, port, [conf]);
      sentinels.push(port);
    }
    // Failover needs the Sentinels to know the replica and each other (found by hello messages).
    await until('the Sentinels to find the replica and each other', 20_000, async () => {
      for (const port of sentinels) {
        const info = (await adminCall(port, 'SENTINEL', 'MASTER', MASTER_NAME)) as string[];
        const field = (name: string) => Number(info[info.indexOf(name) + 1]);
        if (field('num-slaves') < 1 || field('num-other-sentinels') < 2) return undefined;
      }
      return true;
    });
    const masterPort = async () => Number(((await adminCall(sentinels[0]!, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as string[])[1]);
    const env = { TOOLGATE_REDIS_SENTINELS: sentinels.map((p) => `127.0.0.1:${p}`).join(','), TOOLGATE_REDIS_SENTINEL_MASTER: MASTER_NAME };
    return {
      topology: 'sentinel',
      env,
      config: {
        topology: 'sentinel',
        sentinels: sentinels.map((port) => ({ host: '127.0.0.1', port })),
        masterName: MASTER_NAME,
        sentinelUsername: undefined,
        sentinelPassword: undefined,
        username: undefined,
        password: undefined,
        tls: false,
      },
      masterPort,
      async killMaster() {
        const oldPort = await masterPort();
        const killedAt = performance.now();
        await procs.kill(oldPort);
        const newPort = await until('a Sentinel failover', 30_000, async () => {
          const port = await masterPort();
          return port !== oldPort && /role:master/.test(String(await adminCall(port, 'INFO', 'replication'))) ? port : undefined;
        });
        return { killedAt, promotedAt: performance.now(), oldPort, newPort };
      },
      logs: () => procs.logs(),
      close: () => procs.close(),
    };
  });
}

export async function startRedisCluster(): Promise<RedisHa> {
  return withProcesses('tg-cluster-', async (procs) => {
    const ports: number[] = [];
    for (let i = 0; i < 6; i++) {
      const port = await freePort();
      const dir = path.join(procs.dir, String(port));
      await fs.mkdir(dir);
      await procs.start(REDIS_SERVER, port, [
        ...dataArgs(port, dir),
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        '--cluster-node-timeout',
        '1000',
        // A replica may always stand for election: under a loaded machine its link to the master
        // can look stale, and with the default factor it then never fails over (seen once in CI).
        '--cluster-replica-validity-factor',
        '0',
      ]);
      ports.push(port);
    }
    await promisify(execFile)(REDIS_CLI, ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'], {
      timeout: 30_000,
    });
    await until('every node to see the cluster ok', 20_000, async () => {
      for (const port of ports) if (!/cluster_state:ok/.test(String(await adminCall(port, 'CLUSTER', 'INFO')))) return undefined;
      return true;
    });
    const slot = Number(await adminCall(ports[0]!, 'CLUSTER', 'KEYSLOT', '{toolgate}'));
    /** The port of the master serving toolgate's slot, as `askPort` sees it. */
    const ownerSeenBy = async (askPort: number) => {
      const ranges = (await adminCall(askPort, 'CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
      const range = ranges.find(([from, to]) => from <= slot && slot <= to);
      return range ? Number(range[2][1]) : undefined;
    };
    const alive = () => ports.filter((p) => procs.all.has(p));
    const masterPort = async () => (await ownerSeenBy(alive()[0]!))!;
    return {
      topology: 'cluster',
      env: { TOOLGATE_REDIS_CLUSTER_NODES: ports.map((p) => `127.0.0.1:${p}`).join(',') },
      config: { topology: 'cluster', nodes: ports.map((port) => ({ host: '127.0.0.1', port })), username: undefined, password: undefined, tls: false },
      masterPort,
      async killMaster() {
        const oldPort = await masterPort();
        const killedAt = performance.now();
        await procs.kill(oldPort);
        const newPort = await until('a Cluster failover', 30_000, async () => {
          const ask = alive()[0]!;
          const port = await ownerSeenBy(ask);
          if (port === undefined || port === oldPort) return undefined;
          return /cluster_state:ok/.test(String(await adminCall(ask, 'CLUSTER', 'INFO'))) ? port : undefined;
        });
        return { killedAt, promotedAt: performance.now(), oldPort, newPort };
      },
      logs: () => procs.logs(),
      close: () => procs.close(),
    };
  });
}

/**
 * Sends PING until +PONG comes back (the server has loaded and accepts commands); `loggedOut`:
 * a NOAUTH refusal counts too (a server whose default user is off).
 */
export async function waitForPong(port: number, timeoutMs: number, loggedOut = false): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await ping(port, loggedOut)) return;
    if (Date.now() > until) throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function ping(port: number, loggedOut: boolean): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG') || (loggedOut && reply.startsWith('-NOAUTH')));
    });
  });
}
