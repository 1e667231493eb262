/**
 * A real toolgate deployment for the fault suite, on 127.0.0.1 only: `toolgate serve` (the
 * gateway) and, with a Redis, `toolgate executor` processes — the compiled CLI in dist/, each
 * process started with an explicit environment (nothing inherited from the machine's TOOLGATE_*),
 * its own data directory and free port, and stopped or killed by its own pid. Without a Redis
 * the gateway embeds the executor. Tokens are signed with the deployment's TOOLGATE_JWT_SECRET.
 *
 * Faults are applied from the outside, as they would happen: `kill(service, 'SIGKILL')`, the
 * gateway restarted on the same port, Redis stopped and started (test/helpers/redis.ts).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { request } from 'undici';
import { baseEnv, freePort, Service, startService, waitForHttp } from '../../bench/lib/services';
import { workspaceName } from '../../executor/tenant-names';
import { PERMISSIONS } from '../../shared/auth/permissions';
import { signToken } from '../../shared/auth/token';
import type { RedisConfig } from '../../shared/redis-config';
import { unmountUnder } from '../helpers/mounts';

export const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');

export interface FaultStackOptions {
  /**
   * The bus (a Redis, or a Sentinel group or Cluster: its TOOLGATE_REDIS_* variables): the gateway
   * only enqueues and `executors` executor processes run the calls. Unset: executor embedded in serve.
   */
  redis?: { readonly env: Record<string, string>; readonly config: RedisConfig };
  /** Executor processes to start with the stack (default 1 with Redis). */
  executors?: number;
  /** TOOLGATE_SANDBOX (default none). */
  sandbox?: 'none' | 'bwrap' | 'docker';
  /** More TOOLGATE_* settings for every process. */
  env?: Record<string, string>;
  /** Start the gateway with the stack (default true); false leaves its port unserved. */
  gateway?: boolean;
}

export interface RpcReply {
  jsonrpc: string;
  id: unknown;
  result?: { isError?: boolean; structuredContent?: Record<string, unknown>; content?: unknown };
  error?: { code: number; message: string; data?: unknown };
}

/** What a caller saw: a reply (any HTTP status) or no reply at all, and how long it took. */
export type Answer = { ms: number } & ({ status: number; reply: RpcReply } | { failure: string });

export class FaultStack {
  readonly executors: Service[] = [];
  gateway: Service | undefined;
  private readonly env: Record<string, string>;
  private readonly retired: Service[] = [];

  private constructor(
    readonly port: number,
    readonly dataDir: string,
    readonly secret: string,
    private readonly options: FaultStackOptions,
  ) {
    this.env = baseEnv({
      // Docker suites reach dockerd the way the test runner does.
      ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}),
      TOOLGATE_HOST: '127.0.0.1',
      TOOLGATE_PORT: String(port),
      TOOLGATE_JWT_SECRET: secret,
      TOOLGATE_DATA_DIR: dataDir,
      TOOLGATE_SANDBOX: options.sandbox ?? 'none',
      // info: the executor's "executor ready" line tells when it consumes.
      TOOLGATE_LOG_LEVEL: 'info',
      TOOLGATE_SHUTDOWN_GRACE_MS: '2000',
      TOOLGATE_CALLS_PER_MINUTE: '1000000',
      TOOLGATE_MAX_CONCURRENT_CALLS: '256',
      ...options.redis?.env,
      ...options.env,
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/`;
  }

  static async start(options: FaultStackOptions = {}): Promise<FaultStack> {
    if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build first (npx tsc -p tsconfig.build.json)`);
    const dataDir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-fault-')));
    await fs.chmod(dataDir, 0o711);
    const stack = new FaultStack(await freePort(), dataDir, randomBytes(32).toString('hex'), options);
    try {
      if (options.redis) for (let i = 0; i < (options.executors ?? 1); i++) await stack.startExecutor();
      if (options.gateway !== false) await stack.startGateway();
    } catch (err) {
      await stack.close();
      throw err;
    }
    return stack;
  }

  /** Starts `toolgate serve` on the stack's port and waits for /readyz. */
  async startGateway(): Promise<Service> {
    if (this.gateway) throw new Error('the gateway is already running');
    const gateway = startService('toolgate serve', process.execPath, [BIN, 'serve'], this.env);
    this.gateway = gateway;
    await waitForHttp(gateway, `${this.url}readyz`, 30_000);
    return gateway;
  }

  /**
   * Starts another `toolgate serve` on its own free port, sharing the stack's Redis, secret and
   * data directory (a second gateway replica behind a proxy); stopped with the stack.
   */
  async startReplica(): Promise<{ service: Service; url: string }> {
    if (!this.options.redis) throw new Error('a gateway replica needs the Redis bus');
    const port = await freePort();
    const service = startService(`toolgate serve (replica :${port})`, process.execPath, [BIN, 'serve'], { ...this.env, TOOLGATE_PORT: String(port) });
    this.retired.push(service);
    const url = `http://127.0.0.1:${port}/`;
    await waitForHttp(service, `${url}readyz`, 30_000);
    return { service, url };
  }

  /** Starts a `toolgate executor` and waits until it consumes. */
  async startExecutor(env: Record<string, string> = {}): Promise<Service> {
    const n = this.executors.length + this.retired.length;
    const executor = startService(`toolgate executor #${n}`, process.execPath, [BIN, 'executor'], { ...this.env, TOOLGATE_EXECUTOR_ID: `fault-${n}`, ...env });
    this.executors.push(executor);
    await eventually(
      async () => {
        if (executor.stderr().includes('"executor ready"')) return true;
        if (await Promise.race([executor.exited.then(() => true), sleep(0).then(() => false)]))
          throw new Error(`${executor.name} exited during start-up:\n${executor.stderr()}`);
        return false;
      },
      `${executor.name} to be ready`,
      30_000,
    );
    return executor;
  }

  /** Sends `signal` to a service of the stack and waits until it has exited. */
  async kill(service: Service, signal: NodeJS.Signals): Promise<void> {
    process.kill(service.pid, signal);
    await service.exited;
    if (service === this.gateway) this.gateway = undefined;
    const i = this.executors.indexOf(service);
    if (i >= 0) this.executors.splice(i, 1);
    this.retired.push(service);
  }

  token(id: string, permissions: readonly string[] = PERMISSIONS): string {
    const iat = Math.floor(Date.now() / 1000) - 5;
    return signToken({ id, permissions, iat, exp: iat + 3600 }, this.secret);
  }

  /** Host path of a tenant's workspace (as the executor names it). */
  workspaceOf(tenant: string): string {
    return path.join(this.dataDir, 'workspaces', workspaceName(tenant));
  }

  /** Lines of a file in a tenant's workspace ([] while it does not exist). */
  linesOf(tenant: string, file: string): string[] {
    try {
      return readFileSync(path.join(this.workspaceOf(tenant), file), 'utf8')
        .split('\n')
        .filter(Boolean);
    } catch {
      return [];
    }
  }

  /** tools/call over HTTP; never throws: a missing reply is an Answer with `failure` (the error code). */
  call(token: string, tool: string, args: Record<string, unknown>, options: { id?: string | number; timeoutMs?: number } = {}): Promise<Answer> {
    return post(
      this.url,
      token,
      { jsonrpc: '2.0', id: options.id ?? 1, method: 'tools/call', params: { name: tool, arguments: args } },
      options.timeoutMs ?? 20_000,
    );
  }

  async readyz(): Promise<number> {
    try {
      const res = await request(`${this.url}readyz`, { headersTimeout: 5000, bodyTimeout: 5000 });
      await res.body.dump();
      return res.statusCode;
    } catch {
      return 0;
    }
  }

  /** Every service's stderr, for a failing test's message. */
  logs(): string {
    return [this.gateway, ...this.executors, ...this.retired]
      .filter((s): s is Service => s !== undefined)
      .map((s) => `--- ${s.name} (pid ${s.pid})\n${s.stderr().trim().slice(-3000)}`)
      .join('\n');
  }

  async close(): Promise<void> {
    for (const s of [this.gateway, ...this.executors, ...this.retired]) await s?.stop();
    this.gateway = undefined;
    this.executors.length = 0;
    this.retired.length = 0;
    await unmountUnder(this.dataDir); // workspace images a killed executor left mounted
    await fs.rm(this.dataDir, { recursive: true, force: true });
  }
}

/** One JSON-RPC POST with its own deadline. */
export async function post(url: string, token: string, body: unknown, timeoutMs: number): Promise<Answer> {
  const t0 = performance.now();
  try {
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const text = await res.body.text();
    return { ms: performance.now() - t0, status: res.statusCode, reply: JSON.parse(text) as RpcReply };
  } catch (err) {
    const e = err as Error & { code?: string };
    return { ms: performance.now() - t0, failure: e.code ?? e.name };
  }
}

/** The structured result of a successful call, or a thrown description of what came instead. */
export function resultOf(answer: Answer): Record<string, unknown> {
  if ('failure' in answer) throw new Error(`no reply: ${answer.failure}`);
  const { reply } = answer;
  if (reply.error || reply.result?.isError || !reply.result?.structuredContent) throw new Error(`not a success: ${JSON.stringify(reply).slice(0, 400)}`);
  return reply.result.structuredContent;
}

/** The process ids from `pid` up to init (pid itself first). */
export function ancestors(pid: number): number[] {
  const chain: number[] = [];
  for (let p = pid; p > 1 && chain.length < 64;) {
    chain.push(p);
    try {
      p = Number(/^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      break;
    }
  }
  return chain;
}

/** Kills a process group left behind by a killed parent (a `run_command` shell), if still there. */
export function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // gone already, or not a group leader
  }
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

/** One line on stderr with a fault's measured outcome (timings), for whoever reads the test log. */
export function note(fault: string, text: string): void {
  process.stderr.write(`[faults] ${fault}: ${text}\n`);
}
