/**
 * A private Redis for the bus benchmarks: Debian's redis-server on a free 127.0.0.1 port, no
 * persistence, its own temporary directory, stopped by pid.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REDIS_SERVER } from './availability';
import { freePort, Service, startService } from './services';

export interface BenchRedis {
  url: string;
  service: Service;
  close(): Promise<void>;
}

export async function startRedis(): Promise<BenchRedis> {
  const port = await freePort();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-bench-redis-'));
  const service = startService(
    'redis-server',
    REDIS_SERVER,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--loglevel', 'warning'],
    { PATH: '/usr/bin:/bin' },
  );
  const close = async () => {
    await service.stop();
    await fs.rm(dir, { recursive: true, force: true });
  };
  try {
    await waitForPong(port, service);
  } catch (err) {
    await close();
    throw err;
  }
  return { url: `redis://127.0.0.1:${port}`, service, close };
}

async function waitForPong(port: number, service: Service): Promise<void> {
  const { default: Redis } = await import('ioredis');
  const until = Date.now() + 10_000;
  for (;;) {
    const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => undefined);
    try {
      await client.connect();
      if ((await client.ping()) === 'PONG') return;
    } catch {
      // not up yet
    } finally {
      client.disconnect();
    }
    if (Date.now() > until) throw new Error(`redis-server on ${port} did not answer PING:\n${service.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Commands Redis has run so far, by name (INFO commandstats). */
export async function commandCounts(url: string): Promise<Map<string, number>> {
  const { default: Redis } = await import('ioredis');
  const client = new Redis(url, { lazyConnect: true });
  try {
    await client.connect();
    const text = await client.info('commandstats');
    const counts = new Map<string, number>();
    for (const line of text.split('\n')) {
      const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
      if (m) counts.set(m[1]!, Number(m[2]));
    }
    return counts;
  } finally {
    client.disconnect();
  }
}

/** Redis commands per call of `call`, over `n` sequential calls: total and the busiest commands. */
export async function commandsPerCall(url: string, call: () => Promise<unknown>, n: number): Promise<string> {
  const before = await commandCounts(url);
  for (let i = 0; i < n; i++) await call();
  const after = await commandCounts(url);
  // INFO itself is one command per reading.
  const per = [...after].map(([k, v]) => [k, (v - (before.get(k) ?? 0) - (k === 'info' ? 1 : 0)) / n] as const).filter(([, v]) => v > 0.005);
  const total = per.reduce((s, [, v]) => s + v, 0);
  const top = per
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([k, v]) => `${k} ${v.toFixed(1)}`);
  return `${total.toFixed(1)} (${top.join(', ')})`;
}
