/**
 * A real Redis for tests: Debian's `/usr/bin/redis-server` on a free 127.0.0.1 port, no
 * persistence (`--save "" --appendonly no`), stopped by pid. `stop()` + `start()` restart it on
 * the same port, empty, as a crashed and restarted Redis would be (for fault tests).
 *
 * Suites wrap themselves in `describeRedis`: outside CI a machine without redis-server skips
 * them with the reason; in CI they fail.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { RedisConfig } from '../../shared/redis-config';
import { waitForPong } from '../../bench/lib/redis-ha';
import { describeIf } from './availability';
import { freePort } from './ports';

export const REDIS_SERVER = '/usr/bin/redis-server';
export const redisAvailable = existsSync(REDIS_SERVER);

export function describeRedis(name: string, body: () => void): void {
  describeIf(redisAvailable, `${REDIS_SERVER} is not installed (apt-get install redis-server)`, name, body);
}

export interface TestRedis {
  readonly port: number;
  /** redis://127.0.0.1:PORT */
  readonly url: string;
  /** The same Redis as toolgate's configuration (TOOLGATE_REDIS_URL). */
  readonly config: RedisConfig;
  /** The TOOLGATE_REDIS_* variables that name it, for a toolgate process. */
  readonly env: Record<string, string>;
  /** Whether the server process is running. */
  readonly running: boolean;
  /** Starts the server again on the same port (after `stop`), empty. */
  start(): Promise<void>;
  /** Stops the server (SIGTERM, then SIGKILL after 3 s) and waits for it to exit. */
  stop(): Promise<void>;
  /** Stops the server and removes its working directory. */
  close(): Promise<void>;
}

export { freePort };

export async function startRedis(): Promise<TestRedis> {
  const port = await freePort();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-redis-'));
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = async () => {
    if (child) throw new Error(`redis-server on port ${port} is already running`);
    const proc = spawn(
      REDIS_SERVER,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--loglevel', 'warning'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    proc.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
    child = proc;
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    const gone = exited.then(() => {
      throw new Error(`redis-server exited during start-up on port ${port}: ${stderr.trim() || 'no message'}`);
    });
    try {
      await Promise.race([waitForPong(port, 10_000), gone]);
    } catch (err) {
      await stop();
      throw err;
    }
    gone.catch(() => undefined);
  };

  const stop = async () => {
    const proc = child;
    if (!proc) return;
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      const killer = setTimeout(() => proc.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(killer);
    }
    child = undefined;
  };

  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    config: urlConfig(`redis://127.0.0.1:${port}`),
    env: { TOOLGATE_REDIS_URL: `redis://127.0.0.1:${port}` },
    get running() {
      return child !== undefined;
    },
    start,
    stop,
    close: async () => {
      await stop();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

/** toolgate's Redis configuration for one Redis at `url`. */
export function urlConfig(url: string): RedisConfig {
  return { topology: 'url', url, username: undefined, password: undefined, tls: url.startsWith('rediss://') };
}
