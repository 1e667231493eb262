/**
 * Logging in to Redis as a user would configure it, on a real redis-server: an ACL user
 * (TOOLGATE_REDIS_USERNAME / _PASSWORD, the default user switched off) for every Redis user of
 * toolgate — the bus (queues, a worker, replies), quotas, tasks, revocations — and TLS
 * (`rediss://`, the CA given to Node by NODE_EXTRA_CA_CERTS) through the `toolgate` CLI.
 */
import { execFile, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import type { Bus } from '../../shared/bus/bus';
import { createBus } from '../../shared/bus/index';
import { loadConfig } from '../../shared/config';
import { createQuotaStore } from '../../shared/quota/index';
import { describeIf, hasCommand } from '../helpers/availability';
import { describeRedis } from '../helpers/redis';
import { freePort } from '../helpers/ports';
import { startRedisServer } from '../../bench/lib/redis-ha';
import { capturedLogger, job } from '../executor/helpers';

const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');

describeRedis('Redis login: an ACL user', () => {
  let server: { port: number; close(): Promise<void> };
  let bus: Bus | undefined;
  beforeAll(async () => {
    server = await startRedisServer(() => ['--user', 'default', 'off', '--user', 'toolgate', 'on', '>s3cret', '~*', '&*', '+@all']);
  });
  afterAll(async () => {
    await bus?.close();
    await server?.close();
  });

  const env = (password: string) => ({
    TOOLGATE_REDIS_URL: `redis://127.0.0.1:${server.port}`,
    TOOLGATE_REDIS_USERNAME: 'toolgate',
    TOOLGATE_REDIS_PASSWORD: password,
  });

  it('runs the bus, quotas, tasks and revocations as that user', async () => {
    const config = loadConfig(env('s3cret'));
    bus = await createBus(config, capturedLogger().log);
    const consumer = await bus.consume(async (j) => ({ content: [{ type: 'text', text: `ran ${j.tool}` }] }), { concurrency: 2 });
    try {
      const result = await bus.call(job('alice', 'read_file', { path: 'x' }), new AbortController().signal);
      expect(result.content).toEqual([{ type: 'text', text: 'ran read_file' }]);
      await bus.revocations.revoke('mallory', 1000);
      expect(bus.revocations.notBefore('mallory')).toBe(1000);
      const task = {
        taskId: 't1',
        tenant: 'alice',
        tool: 'run_command',
        status: 'working' as const,
        createdAt: Date.now(),
        lastUpdatedAt: Date.now(),
        ttlMs: 60_000,
        pollIntervalMs: 1000,
      };
      expect(await bus.tasks.create(task, 4)).toBe(true);
      expect(await bus.tasks.get('alice', 't1')).toMatchObject({ taskId: 't1', status: 'working' });
      const quotas = await createQuotaStore(config);
      try {
        const verdict = await quotas.enter({ lease: { key: 'alice', max: 1 }, budget: { key: 'alice', perMinute: 10 } });
        expect(verdict.allowed).toBe(true);
        expect(await quotas.held('alice')).toBe(1);
      } finally {
        await quotas.close();
      }
    } finally {
      await consumer.close();
    }
  });

  it('says which Redis refused a wrong password', async () => {
    await expect(createBus(loadConfig({ ...env('wrong'), TOOLGATE_LOG_LEVEL: 'silent' }), capturedLogger().log)).rejects.toThrow(
      /cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+ .*(WRONGPASS|invalid username-password)/,
    );
  }, 20_000);
});

function runCli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describeIf(hasCommand('openssl'), 'needs openssl (a self-signed certificate for Redis TLS)', 'Redis login over TLS', () =>
  describeRedis('Redis login: TLS (rediss://) and an ACL user, through the CLI', () => {
    let server: { port: number; close(): Promise<void> };
    let tlsPort: number;
    let dir: string;
    beforeAll(async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-redis-tls-'));
      // A self-signed certificate for 127.0.0.1, which the client trusts as its own CA.
      await promisify(execFile)('openssl', [
        ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1'],
        ...['-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')],
      ]);
      tlsPort = await freePort();
      server = await startRedisServer(() => [
        ...['--tls-port', String(tlsPort), '--tls-cert-file', path.join(dir, 'cert.pem'), '--tls-key-file', path.join(dir, 'key.pem')],
        ...['--tls-ca-cert-file', path.join(dir, 'cert.pem'), '--tls-auth-clients', 'no'],
        ...['--user', 'default', 'off', '--user', 'toolgate', 'on', '>s3cret', '~*', '&*', '+@all'],
      ]);
    });
    afterAll(async () => {
      await server?.close();
      await fs.rm(dir, { recursive: true, force: true });
    });

    const env = (extra: Record<string, string> = {}) => ({
      TOOLGATE_REDIS_URL: `rediss://toolgate:s3cret@127.0.0.1:${tlsPort}`,
      TOOLGATE_DATA_DIR: dir,
      ...extra,
    });

    it('stores and reads an egress policy and a revocation over TLS', async () => {
      const ca = { NODE_EXTRA_CA_CERTS: path.join(dir, 'cert.pem') };
      const set = await runCli(['egress', 'set', '--id', 'alice', '--allow', 'example.com'], env(ca));
      expect(set).toMatchObject({ code: 0, stdout: expect.stringContaining('in Redis at rediss://***@127.0.0.1:') });
      const show = await runCli(['egress', 'show', '--id', 'alice'], env(ca));
      expect(show).toMatchObject({ code: 0, stdout: 'allow: example.com\ndeny: \n' });
      const revoke = await runCli(['revoke', '--id', 'mallory'], env(ca));
      expect(revoke).toMatchObject({ code: 0, stdout: expect.stringMatching(/^revoked: tokens of "mallory"/) });
    }, 30_000);

    it('refuses a server whose certificate it does not trust', async () => {
      const r = await runCli(['egress', 'show', '--id', 'alice'], env());
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/cannot reach Redis at rediss:\/\/\*\*\*@127\.0\.0\.1:\d+ .*(self-signed|certificate)/);
    }, 30_000);
  }),
);
