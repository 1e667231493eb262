/**
 * A real gateway on 127.0.0.1:0: createGateway → Koa on a socket, the in-process bus, and an
 * executor consuming it that runs each tenant's tools in its own `none` sandbox agent (a real
 * child process) over a temporary data directory. Tests drive it with real HTTP.
 */
import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { SingleSandbox } from '../../executor/sandbox/single';
import { noneBackend } from '../../executor/sandbox/none';
import { SandboxToolRunner } from '../../executor/sandbox-runner';
import { createAuthenticators } from '../../gateway/auth/index';
import { createGateway, Gateway } from '../../gateway/gateway';
import { listen, Listening } from '../../gateway/listen';
import { PERMISSIONS } from '../../shared/auth/permissions';
import { signToken } from '../../shared/auth/token';
import type { Consumer, JobHandler } from '../../shared/bus/bus';
import type { BusEvent } from '../../shared/bus/events';
import { InProcessBus } from '../../shared/bus/in-process';
import { Config, loadConfig } from '../../shared/config';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import { createHttpPolicy } from '../../shared/tools/http/policy';
import { ALL_TOOLS } from '../../shared/tools/index';
import { LocalToolRunner } from '../../shared/tools/local-runner';
import { ToolRegistry } from '../../shared/tools/registry';

export interface TestGateway {
  url: string;
  secret: string;
  config: Readonly<Config>;
  bus: InProcessBus;
  gateway: Gateway;
  /** Every event seen on the bus, in order. */
  events: BusEvent[];
  /** The workspace the executor gives `tenant` (created on its first sandbox call). */
  workspaceOf(tenant: string): string;
  token(claims?: { id?: string; permissions?: readonly string[]; iat?: number; exp?: number }, secret?: string): string;
  /** POST / with the spec's headers (Bearer + Content-Type) and this body. */
  post(body: unknown, options?: { token?: string | null; headers?: Record<string, string>; raw?: string | Buffer }): Promise<Response>;
  close(): Promise<void>;
}

export interface TestGatewayOptions {
  /** TOOLGATE_* variables on top of the harness's own. */
  env?: Record<string, string>;
  /** Runs jobs instead of the sandbox executor. */
  handler?: JobHandler;
}

const silent = pino({ level: 'silent' });

export async function startTestGateway(options: TestGatewayOptions = {}): Promise<TestGateway> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-gw-'));
  const secret = randomBytes(32).toString('base64url');
  const config = loadConfig({ TOOLGATE_DATA_DIR: dataDir, TOOLGATE_JWT_SECRET: secret, TOOLGATE_LOG_LEVEL: 'silent', ...options.env }, dataDir);
  const bus = new InProcessBus();
  const events: BusEvent[] = [];
  bus.subscribe((e) => events.push(e));

  const workspaceOf = (tenant: string) => path.join(dataDir, 'workspaces', createHash('sha256').update(tenant).digest('hex').slice(0, 32));
  const registry = new ToolRegistry(ALL_TOOLS);
  const sandboxes = new Map<string, SingleSandbox>();
  const backend = noneBackend();
  const sandboxFor = async (tenant: string) => {
    let single = sandboxes.get(tenant);
    if (!single) {
      await fs.mkdir(workspaceOf(tenant), { recursive: true });
      single = new SingleSandbox(backend, { workspace: workspaceOf(tenant), limits: config.limits, tenant });
      sandboxes.set(tenant, single);
      bus.publish({ type: 'sandbox.started', tenant, backend: backend.name, at: Date.now(), startMs: 0 });
    }
    return single.get();
  };
  const runner = new SandboxToolRunner(
    (caller) => sandboxFor(caller.tenant),
    new LocalToolRunner({ trusted: { limits: config.limits, http: createHttpPolicy(config.httpAllow) } }),
    async () => {
      await Promise.all([...sandboxes.values()].map((s) => s.stop()));
    },
  );
  const handler: JobHandler =
    options.handler ??
    (async (job, signal) => {
      const tool = registry.get(job.tool);
      if (!tool) throw new ProtocolError(ErrorCode.InvalidParams, `Unknown tool: ${job.tool}`);
      return runner.run(tool, job.args, { tenant: job.tenant, permissions: new Set(job.permissions) }, signal);
    });
  const consumer: Consumer = await bus.consume(handler, { concurrency: config.executor.concurrency });

  const gateway = createGateway({
    config,
    bus,
    authenticators: createAuthenticators({ secret, revocations: bus.revocations, oauth: config.oauth }),
    log: silent,
    processMetrics: false,
  });
  const listening: Listening = await listen(gateway.app, '127.0.0.1', 0);
  const url = listening.url;

  const token: TestGateway['token'] = (claims = {}, key = secret) => {
    const iat = claims.iat ?? Math.floor(Date.now() / 1000);
    return signToken({ id: claims.id ?? 'alice', permissions: claims.permissions ?? [...PERMISSIONS], iat, exp: claims.exp ?? iat + 3600 }, key);
  };

  const post: TestGateway['post'] = (body, opts = {}) => {
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    const bearer = opts.token === undefined ? token() : opts.token;
    if (bearer !== null) headers.Authorization = `Bearer ${bearer}`;
    return fetch(url, { method: 'POST', headers: { ...headers, ...opts.headers }, body: opts.raw ?? JSON.stringify(body) });
  };

  return {
    url,
    secret,
    config,
    bus,
    gateway,
    events,
    workspaceOf,
    token,
    post,
    async close() {
      await listening.close(0);
      await gateway.close();
      await consumer.close();
      await bus.close();
      await runner.close();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

export interface RpcReply {
  jsonrpc: string;
  id: unknown;
  result?: any;
  error?: { code: number; message: string; data?: any };
}

/** The parsed JSON of a response, after checking it is application/json. */
export async function json(res: Response): Promise<any> {
  expect(res.headers.get('content-type')).toMatch(/^application\/json\b/);
  return res.json();
}
