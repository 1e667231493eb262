/**
 * The backup procedure of docs/operating.md, run as written on a real executor's data directory
 * (bwrap, a workspace quota: each tenant's files live in a sparse ext4 image): the executor
 * stops, `tar --sparse` archives the data directory, the directory is wiped, `tar --sparse`
 * restores it, and a new executor serves the same files. The archive and the restored image
 * stay small (a copy that loses sparseness would be the quota's full size per tenant).
 */
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Executor, startExecutor } from '../../executor/executor';
import { workspaceName } from '../../executor/tenant-names';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { unmountUnder } from '../helpers/mounts';
import { call, CapturingBus, capturedLogger, testConfig, text } from './helpers';

const QUOTA = 256 * 1024 * 1024;

describeIf(hasCommand('bwrap') && isRoot, 'needs bubblewrap and root (to loop-mount)', 'backup and restore of the data directory', () => {
  let work: string;
  let dataDir: string;
  let bus: CapturingBus;
  let executor: Executor | undefined;
  const env = {
    TOOLGATE_SANDBOX: 'bwrap',
    TOOLGATE_WORKSPACE_QUOTA_BYTES: String(QUOTA),
    TOOLGATE_EXECUTOR_ID: `backup-test-${process.pid}`,
  };
  const start = async () => {
    executor = await startExecutor({ config: testConfig(dataDir, env), bus, log: capturedLogger().log });
  };

  beforeAll(async () => {
    work = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-backup-'));
    await fs.chmod(work, 0o711); // sandbox uids must reach the workspaces below it
    dataDir = path.join(work, 'data');
    await fs.mkdir(dataDir, { mode: 0o700 });
    bus = new CapturingBus();
    await start();
  }, 120_000);
  afterAll(async () => {
    await executor?.close();
    await bus?.close();
    if (work) {
      await unmountUnder(work);
      await fs.rm(work, { recursive: true, force: true });
    }
  });

  it('brings every file back from a sparse archive, and the archive and image stay small', async () => {
    const payload = 'line of a tenant file\n'.repeat(5000);
    expect((await call(bus, 'alice', 'write_file', { path: 'notes/a.txt', content: payload })).isError).toBeFalsy();
    expect((await call(bus, 'bob', 'write_file', { path: 'b.txt', content: 'bob' })).isError).toBeFalsy();
    await executor!.close(); // docs: stop first, so the images are unmounted and consistent
    executor = undefined;

    const archive = path.join(work, 'toolgate-backup.tgz');
    execFileSync('tar', ['--sparse', '-C', dataDir, '-czf', archive, '.']);
    const archived = (await fs.stat(archive)).size;
    expect(archived).toBeLessThan(QUOTA / 16); // two tenants' images, mostly holes

    await fs.rm(dataDir, { recursive: true, force: true });
    await fs.mkdir(dataDir, { mode: 0o700 });
    execFileSync('tar', ['--sparse', '-C', dataDir, '-xzf', archive]);
    const image = await fs.stat(path.join(dataDir, 'workspace-images', `${workspaceName('alice')}.ext4`));
    expect(image.size).toBe(QUOTA);
    expect(image.blocks * 512).toBeLessThan(QUOTA / 4); // restored sparse, not written in full

    await start();
    expect(text(await call(bus, 'alice', 'read_file', { path: 'notes/a.txt' }))).toBe(payload);
    expect(text(await call(bus, 'bob', 'read_file', { path: 'b.txt' }))).toBe('bob');
  }, 180_000);
});
