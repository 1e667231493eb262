/**
 * The per-tenant container lifecycle, seen from the Docker host: the executor's tenant pool over
 * the docker backend gives each tenant one container, created on its first call, reused while
 * warm, created anew if it dies, and removed once idle or at shutdown.
 */
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { dockerBackend } from '../../executor/sandbox/docker/backend';
import { cleanupStaleSandboxes } from '../../executor/sandbox/docker/stale';
import { TenantPool } from '../../executor/tenant-pool';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { describeIf } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, SANDBOX_IMAGE } from '../helpers/docker';

const never = () => new AbortController().signal;
const IDLE_MS = 5000; // long enough that no step below outlasts it under load

describeIf(!dockerUnavailable, dockerUnavailable ?? '', 'docker backend under the tenant pool', () => {
  const executorId = `pool-test-${process.pid}`;
  let dataDir: string;
  let pool: TenantPool;

  /** This executor's live sandbox containers: tenant → container id. */
  const containers = (): Record<string, string> => {
    const out = execFileSync(
      'docker',
      ['ps', '--no-trunc', '--filter', `label=toolgate.executor=${executorId}`, '--format', '{{.ID}} {{.Label "toolgate.tenant"}}'],
      { encoding: 'utf8' },
    );
    return Object.fromEntries(
      out
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ').reverse() as [string, string]),
    );
  };
  const echo = async (tenant: string, word: string) => {
    const r = await pool.call(tenant, 'run_command', { command: `echo ${word}` }, never());
    return (r.structuredContent as { stdout: string }).stdout;
  };

  beforeAll(async () => {
    await ensureSandboxImage();
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-docker-pool-'));
    pool = new TenantPool({
      backend: dockerBackend({ image: SANDBOX_IMAGE, executorId, dataDir, hostDataDir: dataDir, chownWorkspace: true }),
      dataDir,
      limits: DEFAULT_LIMITS,
      idleMs: IDLE_MS,
      maxSandboxes: 8,
      publish: () => undefined,
      log: pino({ level: 'silent' }),
    });
  }, 180_000);
  afterAll(async () => {
    await pool?.close();
    await cleanupStaleSandboxes(executorId);
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('one container per tenant: created on first use, reused while warm, recreated after a death, removed when idle', async () => {
    expect(containers()).toEqual({});
    expect(await echo('alice', 'one')).toBe('one\n');
    const first = containers();
    expect(Object.keys(first)).toEqual(['alice']);

    expect(await echo('alice', 'two')).toBe('two\n');
    expect(containers()).toEqual(first); // the same container

    expect(await echo('bob', 'hi')).toBe('hi\n');
    expect(Object.keys(containers()).sort()).toEqual(['alice', 'bob']);

    // Alice's container dies (killed from outside): her next call gets a new one, her files stay.
    await pool.call('alice', 'write_file', { path: 'kept.txt', content: 'kept' }, never());
    execFileSync('docker', ['kill', first.alice!]);
    // The backend removes a container once it has reported its exit: then the pool knows.
    for (let i = 0; i < 100 && execFileSync('docker', ['ps', '-aq', '--filter', `id=${first.alice}`], { encoding: 'utf8' }).trim(); i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const read = await pool.call('alice', 'read_file', { path: 'kept.txt' }, never());
    expect(read.content.map((c) => ('text' in c ? c.text : '')).join('')).toBe('kept');
    const now = containers();
    expect(now.alice).toBeDefined();
    expect(now.alice).not.toBe(first.alice);

    // Idle: stopped and removed (not just stopped).
    const left = () => execFileSync('docker', ['ps', '-aq', '--filter', `label=toolgate.executor=${executorId}`], { encoding: 'utf8' }).trim();
    const deadline = Date.now() + IDLE_MS + 15_000;
    while (left() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(left()).toBe('');
  }, 60_000);
});
