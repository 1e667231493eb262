/**
 * Tenants under bwrap through the executor: each tenant's sandbox runs as its own uid over its
 * own workspace, so a tenant's commands see nothing of another tenant — files, processes — and
 * cannot use up another tenant's process limit.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Executor, startExecutor } from '../../executor/executor';
import { tenantUid, workspaceName } from '../../executor/tenant-names';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { ErrorCode } from '../../shared/protocol/errors';
import { call, CapturingBus, capturedLogger, testConfig, text } from './helpers';

interface Ran {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

describeIf(hasCommand('bwrap') && isRoot, 'needs bubblewrap (apt-get install bubblewrap) and root', 'executor with bwrap sandboxes', () => {
  let dataDir: string;
  let bus: CapturingBus;
  let executor: Executor;
  const run = async (tenant: string, command: string): Promise<Ran> => {
    const r = await call(bus, tenant, 'run_command', { command, timeout_ms: 15_000 });
    if (r.isError) throw new Error(`run_command failed: ${text(r)}`);
    return r.structuredContent as unknown as Ran;
  };

  beforeAll(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-exec-bwrap-'));
    bus = new CapturingBus();
    executor = await startExecutor({ config: testConfig(dataDir, { TOOLGATE_SANDBOX: 'bwrap' }), bus, log: capturedLogger().log });
  });
  afterAll(async () => {
    await executor?.close();
    await bus?.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('runs each tenant as its own uid over a workspace it owns alone', async () => {
    const [a, b] = await Promise.all([run('tenant-a', 'id -u; echo A-ONLY > secret.txt'), run('tenant-b', 'id -u')]);
    expect(a.stdout.split('\n')[0]).toBe(String(tenantUid('tenant-a')));
    expect(b.stdout.trim()).toBe(String(tenantUid('tenant-b')));
    const aRoot = path.join(dataDir, 'workspaces', workspaceName('tenant-a'));
    const st = await fs.stat(aRoot);
    expect(st.uid).toBe(tenantUid('tenant-a'));
    expect(st.mode & 0o777).toBe(0o700);
    expect((await fs.stat(path.join(aRoot, 'secret.txt'))).uid).toBe(tenantUid('tenant-a'));
  });

  it("shows a tenant's commands nothing of another tenant's files", async () => {
    await run('tenant-a', 'echo A-ONLY > secret.txt');
    const aDir = workspaceName('tenant-a');
    const aHost = path.join(dataDir, 'workspaces', aDir);
    const b = await run(
      'tenant-b',
      `ls -la .. / /tmp; ls -la ${aHost} ../${aDir} 2>&1; cat ${aHost}/secret.txt ../${aDir}/secret.txt 2>&1; ` +
        'find / \\( -path /proc -o -path /usr -o -path /work \\) -prune -o -name "secret*" -print 2>&1; echo END',
    );
    expect(b.stdout).toMatch(/END\n$/);
    expect(b.stdout).not.toContain('A-ONLY');
    expect(b.stdout).not.toContain('secret.txt\n'); // find printed no file of that name
    // A's directory name appears only where B itself named it, and each time it does not exist.
    const mentions = b.stdout.split('\n').filter((l) => l.includes(aDir));
    expect(mentions).toHaveLength(4);
    for (const line of mentions) expect(line).toMatch(/No such file or directory/);
  });

  it("shows a tenant's commands nothing of another tenant's processes, and cannot signal them", async () => {
    const started = await call(bus, 'tenant-a', 'start_process', { argv: ['sleep', '301'] });
    const handle = started.structuredContent?.handle as string;
    const b = await run('tenant-b', 'cat /proc/[0-9]*/cmdline | tr "\\0" " "; echo END');
    expect(b.stdout).toMatch(/END\n$/);
    expect(b.stdout).not.toContain('sleep 301');
    const fromB = await call(bus, 'tenant-b', 'read_process_output', { handle });
    expect(fromB.isError).toBe(true);
    // Signalling every process it may: that ends B's own sandbox (the call fails), nothing of A's.
    await expect(call(bus, 'tenant-b', 'run_command', { command: 'kill -9 -1; sleep 5' })).rejects.toMatchObject({ code: ErrorCode.OutcomeUnknown });
    const a = await call(bus, 'tenant-a', 'list_processes', {});
    expect(a.structuredContent?.processes).toEqual([expect.objectContaining({ handle, running: true })]);
    await call(bus, 'tenant-a', 'kill_process', { handle });
    // B's next call gets a fresh sandbox.
    expect((await run('tenant-b', 'echo back')).stdout).toBe('back\n');
  });

  it("keeps one tenant's process count from starving another's", async () => {
    // Tenant A fills its process limit (RLIMIT_NPROC, 256) and keeps it full.
    const hog = await call(bus, 'nproc-a', 'start_process', { command: 'for i in $(seq 600); do sleep 120 & done; wait' });
    const handle = hog.structuredContent?.handle as string;
    expect(handle).toBeTruthy();
    // Wait for the condition itself, however slow the machine: the hog's shell stopped at its
    // limit ("Cannot fork"); its sleeps still hold the slots.
    let output = '';
    const deadline = Date.now() + 45_000;
    while (!/Cannot fork/.test(output) && Date.now() < deadline) {
      const page = await call(bus, 'nproc-a', 'read_process_output', { handle, wait_ms: 1000 });
      output += String(page.structuredContent?.data ?? '');
    }
    expect(output).toMatch(/Cannot fork/);
    // Tenant B, another uid, still starts a sandbox (a fresh one: that needs ~15 processes and threads) and commands.
    const b = await run('nproc-b', 'echo b-still-runs; (sleep 0.1 &); echo forked');
    expect(b.stdout).toBe('b-still-runs\nforked\n');
    await call(bus, 'nproc-a', 'kill_process', { handle });
  }, 90_000);
});
