/**
 * The real `toolgate serve` on Redis, with no executor yet: /readyz says not ready and why (the
 * shard no executor consumes), a call fails -32006 naming the shard and `toolgate executor`
 * (it did not run), the log never names a sandbox this gateway does not run, and /readyz turns
 * ready once an executor consumes the shard.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { signToken } from '../../shared/auth/token';
import type { Bus } from '../../shared/bus/bus';
import { createBus } from '../../shared/bus/index';
import { loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/log';
import { ErrorCode } from '../../shared/protocol/errors';
import { freePort } from '../helpers/ports';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';

const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');
const SECRET = 'serve-redis-test-secret-0123456789abcdef';

jest.setTimeout(60_000);

describeRedis('toolgate serve on Redis without an executor', () => {
  let redis: TestRedis;
  let dataDir: string;
  let child: ChildProcess | undefined;
  let executor: Bus | undefined;
  let stderr = '';

  beforeAll(async () => {
    redis = await startRedis();
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-serve-redis-'));
  });
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await executor?.close();
    await redis?.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('is not ready while no executor consumes its shard, says why, and says so to a caller', async () => {
    const port = await freePort();
    const env = { TOOLGATE_REDIS_URL: redis.url, TOOLGATE_DATA_DIR: dataDir, TOOLGATE_PORT: String(port), TOOLGATE_JWT_SECRET: SECRET };
    child = spawn(process.execPath, [BIN, 'serve'], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TOOLGATE_LOG_LEVEL: 'info', TOOLGATE_QUEUE_TIMEOUT_MS: '1000', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const url = `http://127.0.0.1:${port}/`;
    const end = Date.now() + 20_000;
    while (!stderr.includes('toolgate serve ready')) {
      if (Date.now() > end || child.exitCode !== null) throw new Error(`serve did not start:\n${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }

    // The gateway on Redis runs no tools: it names no sandbox.
    const readyLine = stderr.split('\n').find((l) => l.includes('toolgate serve ready'))!;
    expect(JSON.parse(readyLine)).toMatchObject({ bus: 'redis' });
    expect(JSON.parse(readyLine)).not.toHaveProperty('sandbox');
    expect(stderr).not.toMatch(/sandbox: /);

    const notReady = await fetch(new URL('/readyz', url));
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({ status: 'unavailable', reason: expect.stringMatching(/no executor consumes shard 0 .*toolgate executor/) });

    const now = Math.floor(Date.now() / 1000);
    const token = signToken({ id: 'alice', permissions: ['system:exec'], iat: now, exp: now + 600 }, SECRET);
    const res = await fetch(url, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'run_command', arguments: { command: 'true' } } }),
    });
    const reply = (await res.json()) as { error?: { code: number; message: string } };
    expect(reply.error).toMatchObject({
      code: ErrorCode.Unavailable,
      message: expect.stringMatching(/no executor consumes shard 0 .*did not run.*Start `toolgate executor`/),
    });

    // An executor consumes the shard: ready (within the lookup's one-second cache).
    executor = await createBus(loadConfig({ TOOLGATE_REDIS_URL: redis.url }), createLogger('silent'));
    await executor.consume(async () => ({ content: [{ type: 'text', text: 'ok' }] }), { concurrency: 1 });
    const until = Date.now() + 10_000;
    let status = 0;
    while (status !== 200 && Date.now() < until) {
      status = (await fetch(new URL('/readyz', url))).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe(200);
    child.kill('SIGTERM');
  });
});
