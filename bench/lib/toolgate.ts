/**
 * toolgate over HTTP as a deployment runs it: `toolgate serve` (embedded executor, in-process
 * bus) or, with a Redis URL, `toolgate serve` as the gateway plus `toolgate executor` processes.
 * A token signed with the bench's own secret; the tenant's workspace holds the 1 KiB file.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type * as Token from '../../shared/auth/token';
import { FILE_1K } from './fixtures';
import { RpcHttpClient, rpcClient } from './http-client';
import { productModule, serveNodeFlags, TOOLGATE_BIN } from './product';
import { baseEnv, freePort, Service, startService, waitForHttp } from './services';

export interface ToolgateStack {
  url: string;
  token: string;
  gateway: Service;
  executors: Service[];
  /** A client with `connections` keep-alive connections, carrying the token. */
  client(connections: number): RpcHttpClient;
  /** Reads the 1 KiB file as the benchmark tenant. */
  readFile(client: RpcHttpClient): Promise<unknown>;
  /** A token for another identity (same permissions as the benchmark tenant's). */
  tokenFor(id: string): string;
  close(): Promise<void>;
}

export interface StackOptions {
  redisUrl?: string;
  /** Sandbox backend for the executor(s) (default none, or TOOLGATE_BENCH_SANDBOX). */
  sandbox?: string;
  executors?: number;
  /** TOOLGATE_* settings on top of the bench's own (for every process). */
  env?: Record<string, string>;
  /** Node flags for the `toolgate serve` process only, after its deployed ones (they win). */
  gatewayNodeFlags?: readonly string[];
  /** Start `toolgate serve` without its deployed flags, as `node dist/bin/toolgate.js serve` does. */
  bareGateway?: boolean;
  /** Start `toolgate serve` by executing this bin (its `#!` line starts node), as a shell runs a global install's. */
  gatewayBin?: string;
}

const FILE_TEXT = 'The quick brown fox jumps over the lazy dog. 0123456789 abcdefghij\n'.repeat(16).slice(0, 1024);

export async function startToolgate(options: StackOptions = {}): Promise<ToolgateStack> {
  const dataDir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-bench-data-')));
  await fs.chmod(dataDir, 0o711);
  const port = await freePort();
  const secret = randomBytes(32).toString('hex');
  const env = baseEnv({
    TOOLGATE_HOST: '127.0.0.1',
    TOOLGATE_PORT: String(port),
    TOOLGATE_JWT_SECRET: secret,
    TOOLGATE_DATA_DIR: dataDir,
    TOOLGATE_SANDBOX: options.sandbox ?? process.env.TOOLGATE_BENCH_SANDBOX ?? 'none',
    TOOLGATE_LOG_LEVEL: 'warn',
    // The benchmark is one identity calling as fast as it can: lift the per-identity limits.
    TOOLGATE_CALLS_PER_MINUTE: '100000000',
    TOOLGATE_MAX_CONCURRENT_CALLS: '4096',
    // ... and its share of the executors (fair execution): one identity is the whole load here.
    TOOLGATE_TENANT_CONCURRENCY: '4096',
    ...(options.redisUrl ? { TOOLGATE_REDIS_URL: options.redisUrl } : {}),
    ...options.env,
  });
  const services: Service[] = [];
  const close = async () => {
    for (const s of [...services].reverse()) await s.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  };
  // serve as deployed (bin/node-flags.ts); TOOLGATE_BENCH_NODE_FLAGS override them (services.ts).
  const serveFlags = serveNodeFlags();
  try {
    const executors: Service[] = [];
    if (options.redisUrl) {
      for (let i = 0; i < (options.executors ?? 1); i++) {
        const e = startService(`toolgate executor #${i + 1}`, process.execPath, [TOOLGATE_BIN, 'executor'], { ...env, TOOLGATE_EXECUTOR_ID: `bench-${i + 1}` });
        executors.push(e);
        services.push(e);
      }
    }
    const gateway = options.gatewayBin
      ? startService('toolgate serve', options.gatewayBin, ['serve'], env)
      : startService('toolgate serve', process.execPath, [TOOLGATE_BIN, 'serve'], env, undefined, [
          ...(options.bareGateway ? [] : serveFlags),
          ...(options.gatewayNodeFlags ?? []),
        ]);
    services.push(gateway);
    const url = `http://127.0.0.1:${port}/`;
    await waitForHttp(gateway, `${url}readyz`);

    const { signToken } = productModule<typeof Token>('shared/auth/token');
    const iat = Math.floor(Date.now() / 1000) - 5;
    const tokenFor = (id: string) => signToken({ id, permissions: ['file:read', 'file:write', 'file:list', 'system:exec'], iat, exp: iat + 86_400 }, secret);
    const token = tokenFor('bench');
    const headers = { authorization: `Bearer ${token}` };
    const setup = rpcClient(url, headers, 1);
    try {
      // The first call starts the tenant's sandbox (and waits for an executor to come up).
      await setup.call('write_file', { path: FILE_1K, content: FILE_TEXT });
    } catch (err) {
      throw new Error(
        `toolgate did not serve a first call: ${err instanceof Error ? err.message : String(err)}\n${services.map((s) => `${s.name}: ${s.stderr().trim()}`).join('\n')}`,
      );
    } finally {
      await setup.close();
    }
    return {
      url,
      token,
      gateway,
      executors,
      client: (connections) => rpcClient(url, headers, connections),
      readFile: (client) => client.call('read_file', { path: FILE_1K }),
      tokenFor,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
