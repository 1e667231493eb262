/**
 * `toolgate executor` and `toolgate revoke` as processes (dist/bin/toolgate.js): what they refuse
 * without Redis, and with a real Redis: an executor process serving calls until SIGTERM, and a
 * revocation every bus on that Redis learns.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { revocationCutoff } from '../../bin/commands/revoke';
import type { Bus } from '../../shared/bus/bus';
import { createBus } from '../../shared/bus/index';
import { loadConfig } from '../../shared/config';
import { ErrorCode } from '../../shared/protocol/errors';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { capturedLogger, job, text, until } from './helpers';

const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');

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

describe('toolgate executor / revoke without Redis', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-cli-'));
  });
  afterAll(() => fs.rm(dataDir, { recursive: true, force: true }));

  it('executor explains that it needs TOOLGATE_REDIS_URL', async () => {
    const r = await runCli(['executor'], { TOOLGATE_DATA_DIR: dataDir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'toolgate executor needs --redis-url or TOOLGATE_REDIS_URL (or TOOLGATE_REDIS_SENTINELS / TOOLGATE_REDIS_CLUSTER_NODES); `toolgate serve` runs an embedded executor otherwise',
    );
  });

  it('revoke explains that an embedded server cannot be reached', async () => {
    const r = await runCli(['revoke', '--id', 'alice'], { TOOLGATE_DATA_DIR: dataDir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/toolgate revoke needs TOOLGATE_REDIS_URL.*cannot reach/);
  });

  it('revoke refuses bad flags with usage errors', async () => {
    expect((await runCli(['revoke'], {})).code).toBe(2);
    expect((await runCli(['revoke'], {})).stderr).toMatch(/--id \(or --issuer with --sub\) is required/);
    // An OAuth tenant is named by both its issuer and its subject, and never together with --id.
    expect((await runCli(['revoke', '--issuer', 'https://auth.example.com'], {})).stderr).toMatch(/--issuer and --sub go together/);
    expect((await runCli(['revoke', '--sub', 'alice'], {})).code).toBe(2);
    expect((await runCli(['revoke', '--id', 'a', '--issuer', 'https://auth.example.com', '--sub', 'alice'], {})).stderr).toMatch(/not both/);
    const bad = await runCli(['revoke', '--id', 'a', '--before', 'yesterday'], {});
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--before must be "now" or an ISO 8601 time/);
    expect((await runCli(['revoke', '--id', 'a', '--bogus', 'x'], {})).code).toBe(2);
  });

  it('revoke --help prints its usage', async () => {
    const r = await runCli(['revoke', '--help'], {});
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/--id ID/);
  });
});

describe('revocationCutoff', () => {
  it('rounds up, so every token issued before the moment is refused (iat < cutoff)', () => {
    expect(revocationCutoff('now', 1_700_000_000_300)).toBe(1_700_000_001);
    expect(revocationCutoff('now', 1_700_000_000_000)).toBe(1_700_000_000);
    expect(revocationCutoff('2026-01-31T12:00:00Z')).toBe(Date.UTC(2026, 0, 31, 12) / 1000);
    expect(revocationCutoff('2026-01-31T12:00:00.5+01:00')).toBe(Date.UTC(2026, 0, 31, 11) / 1000 + 1);
  });

  it('refuses what is not a time', () => {
    for (const bad of ['', 'tomorrow', '1', '2026-13-45', 'May 5 2026', '2026-01-31T25:00:00Z']) expect(() => revocationCutoff(bad)).toThrow(/--before/);
  });
});

describeRedis('toolgate executor / revoke on Redis', () => {
  let redis: TestRedis;
  let dataDir: string;
  let env: Record<string, string>;
  let bus: Bus | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-cli-redis-'));
    env = { TOOLGATE_REDIS_URL: redis.url, TOOLGATE_DATA_DIR: dataDir, TOOLGATE_SANDBOX: 'none', TOOLGATE_SHUTDOWN_GRACE_MS: '2000' };
  });
  afterAll(async () => {
    await bus?.close();
    await redis?.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('serves calls from the bus until SIGTERM, then exits 0, auditing what it ran', async () => {
    const child: ChildProcess = spawn(process.execPath, [BIN, 'executor'], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    try {
      await until(() => stderr.includes('executor ready'), 15_000);
      bus = await createBus(loadConfig(env, dataDir), capturedLogger().log);
      const signal = new AbortController().signal;
      const w = await bus.call(job('alice', 'write_file', { path: 'a.txt', content: 'over-redis' }), signal);
      expect(w.isError).toBeFalsy();
      expect(text(await bus.call(job('alice', 'read_file', { path: 'a.txt' }), signal))).toBe('over-redis');
      await expect(bus.call(job('alice', 'run_command', { command: 'id' }, { permissions: ['file:read'] }), signal)).rejects.toMatchObject({
        code: ErrorCode.PermissionDenied,
      });
      await until(() => (stderr.match(/"audit":true/g) ?? []).length === 3);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    expect(stderr).toMatch(/executor stopped/);
    expect(stderr).not.toContain('over-redis');
    const audit = stderr
      .split('\n')
      .filter((l) => l.includes('"audit":true'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(audit.map((l) => [l.identity, l.tool, l.outcome])).toEqual([
      ['alice', 'write_file', 'ok'],
      ['alice', 'read_file', 'ok'],
      ['alice', 'run_command', 'error'],
    ]);
  }, 40_000);

  it('without TOOLGATE_SANDBOX it picks bwrap when it can run here, else none with a loud warning (as serve does)', async () => {
    const { TOOLGATE_SANDBOX: _explicit, ...chosen } = env;
    const child: ChildProcess = spawn(process.execPath, [BIN, 'executor'], {
      env: { PATH: process.env.PATH ?? '', TOOLGATE_LOG_LEVEL: 'info', ...chosen },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    try {
      await until(() => stderr.includes('executor ready'), 15_000);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    const ready = JSON.parse(stderr.split('\n').find((l) => l.includes('executor ready'))!) as { sandbox: string };
    const bwrapHere = process.getuid?.() === 0 && ['bwrap', 'setpriv', 'prlimit'].every((c) => ['/usr/bin', '/bin'].some((d) => existsSync(path.join(d, c))));
    if (bwrapHere) expect(ready.sandbox).toBe('bwrap');
    else {
      expect(ready.sandbox).toBe('none');
      expect(stderr).toMatch(/toolgate executor: WARNING: no isolating sandbox is available/);
    }
  }, 40_000);

  it('revoke stores the cut-off on Redis, where every bus learns it', async () => {
    bus ??= await createBus(loadConfig(env, dataDir), capturedLogger().log);
    const before = Math.floor(Date.now() / 1000);
    const r = await runCli(['revoke', '--id', 'mallory'], env);
    expect(r.stderr).not.toMatch(/error/i);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^revoked: tokens of "mallory" issued before /);
    await until(() => (bus!.revocations.notBefore('mallory') ?? 0) >= before + 1);
    // A bus started later loads it from Redis.
    const later = await createBus(loadConfig(env, dataDir), capturedLogger().log);
    try {
      expect(later.revocations.notBefore('mallory')).toBe(bus.revocations.notBefore('mallory'));
    } finally {
      await later.close();
    }
  }, 30_000);
});
