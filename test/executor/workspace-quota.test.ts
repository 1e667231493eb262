/**
 * The workspace disk quota, attacked from inside real bwrap and docker sandboxes: `dd` and
 * `fallocate` past it fail with ENOSPC, so does creating files past the inode cap, `write_file`
 * past it answers isError naming the quota, another tenant still writes, the host's disk gives
 * a tenant no more than its image, and the files persist across an executor restart. Then the
 * module's own lifecycle: a mount left by a crashed executor is cleaned up at start, a workspace
 * from before the quota keeps its files, and a raised quota grows the image.
 */
import { execFileSync } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { Executor, startExecutor } from '../../executor/executor';
import { workspaceName } from '../../executor/tenant-names';
import { WorkspaceQuota } from '../../executor/workspace-quota';
import type { ToolResult } from '../../shared/tools/tool';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage } from '../helpers/docker';
import { unmountUnder } from '../helpers/mounts';
import { call, CapturingBus, capturedLogger, testConfig, text } from './helpers';

const QUOTA = 32 * 1024 * 1024;
const INODES = 2048;
const QUOTA_TEXT = '32 MiB, 2048 files';

interface Ran {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

const mountedAt = (dir: string): boolean =>
  execFileSync('cat', ['/proc/self/mountinfo'], { encoding: 'utf8' })
    .split('\n')
    .some((l) => l.split(' ')[4] === dir);

const backends: Array<{ name: 'bwrap' | 'docker'; why: string | undefined }> = [
  { name: 'bwrap', why: hasCommand('bwrap') && isRoot ? undefined : 'needs bubblewrap and root' },
  { name: 'docker', why: !isRoot ? 'needs root (to loop-mount)' : dockerUnavailable },
];

for (const { name, why } of backends) {
  describeIf(why === undefined, why ?? '', `workspace quota on ${name}`, () => {
    let dataDir: string;
    let bus: CapturingBus;
    let executor: Executor | undefined;
    const env = {
      TOOLGATE_SANDBOX: name,
      TOOLGATE_WORKSPACE_QUOTA_BYTES: String(QUOTA),
      TOOLGATE_WORKSPACE_QUOTA_INODES: String(INODES),
      TOOLGATE_EXECUTOR_ID: `quota-test-${process.pid}`,
    };
    const start = async () => {
      executor = await startExecutor({ config: testConfig(dataDir, env), bus, log: capturedLogger().log });
    };
    const run = async (tenant: string, command: string): Promise<Ran> => {
      const r = await call(bus, tenant, 'run_command', { command, timeout_ms: 30_000 });
      return r.structuredContent as unknown as Ran;
    };
    const workspace = (tenant: string) => path.join(dataDir, 'workspaces', workspaceName(tenant));
    const image = (tenant: string) => path.join(dataDir, 'workspace-images', `${workspaceName(tenant)}.ext4`);

    beforeAll(async () => {
      if (name === 'docker') await ensureSandboxImage();
      dataDir = await fs.mkdtemp(path.join(os.tmpdir(), `tg-quota-${name}-`));
      bus = new CapturingBus();
      await start();
    }, 240_000);
    afterAll(async () => {
      await executor?.close();
      await bus?.close();
      if (dataDir) {
        await unmountUnder(dataDir);
        await fs.rm(dataDir, { recursive: true, force: true });
      }
    });

    it('refuses dd and fallocate past the quota inside the sandbox, and write_file names the quota', async () => {
      const dd = await run('hog', 'dd if=/dev/zero of=big bs=1M count=64 2>&1; echo "dd=$?"');
      expect(dd.stdout).toMatch(/No space left on device/);
      expect(dd.stdout).toMatch(/dd=1/);
      const fa = await run('hog', 'fallocate -l 64M huge 2>&1; echo "fallocate=$?"; ls huge 2>&1');
      expect(fa.stdout).toMatch(/No space left on device/);
      expect(fa.stdout).toMatch(/fallocate=1/);

      const written = await call(bus, 'hog', 'write_file', { path: 'note.txt', content: 'x'.repeat(1024 * 1024) });
      expect(written.isError).toBe(true);
      expect(text(written)).toBe(`Workspace quota exceeded (${QUOTA_TEXT}) while writing note.txt: delete files to make room`);
      const appended = await call(bus, 'hog', 'write_file', { path: 'big', content: 'y'.repeat(1024 * 1024), mode: 'append' });
      expect(appended.isError).toBe(true);
      expect(text(appended)).toContain(`Workspace quota exceeded (${QUOTA_TEXT})`);

      // The host gave this tenant no more than its image: the workspace is a filesystem of its own.
      expect(mountedAt(workspace('hog'))).toBe(true);
      expect((await fs.stat(workspace('hog'))).dev).not.toBe((await fs.stat(dataDir)).dev);
      const st = await fs.stat(image('hog'));
      expect(st.size).toBe(QUOTA);
      expect(st.blocks * 512).toBeLessThanOrEqual(QUOTA);

      // Deleting makes room again.
      expect((await run('hog', 'rm big; echo ok > small; cat small')).stdout).toBe('ok\n');
    }, 120_000);

    it('refuses files past the inode cap', async () => {
      const r = await run(
        'files',
        `i=0; while [ $i -lt ${INODES + 100} ]; do true > f$i 2>/dev/null || break; i=$((i+1)); done; echo "made=$i"; touch one-more`,
      );
      const made = Number(/made=(\d+)/.exec(r.stdout)?.[1]);
      expect(made).toBeGreaterThan(INODES - 50);
      expect(made).toBeLessThan(INODES);
      expect(r.stderr).toMatch(/No space left on device/);
      const created = await call(bus, 'files', 'create_directory', { path: 'd' });
      expect(created.isError).toBe(true);
      expect(text(created)).toContain(`Workspace quota exceeded (${QUOTA_TEXT})`);
    }, 120_000);

    it("leaves other tenants' room untouched while one is full", async () => {
      expect((await run('full', 'fallocate -l 40M x 2>&1; dd if=/dev/zero of=y bs=1M count=40 2>&1 | tail -1')).stdout).toMatch(/No space left/);
      const other: ToolResult = await call(bus, 'neighbour', 'write_file', { path: 'data.bin', content: 'z'.repeat(3 * 1024 * 1024) });
      expect(other.isError).toBeFalsy();
      expect((await run('neighbour', 'stat -c %s data.bin')).stdout).toBe(`${3 * 1024 * 1024}\n`);
    }, 120_000);

    it('keeps the files across an executor restart, unmounted in between', async () => {
      await call(bus, 'keeper', 'write_file', { path: 'kept.txt', content: 'still here' });
      await executor!.close();
      executor = undefined;
      expect(mountedAt(workspace('keeper'))).toBe(false);
      expect(await fs.readdir(workspace('keeper'))).toEqual([]); // the files live in the image only
      await start();
      const back = await call(bus, 'keeper', 'read_file', { path: 'kept.txt' });
      expect(text(back)).toBe('still here');
    }, 120_000);
  });
}

describeIf(isRoot, 'needs root (to loop-mount)', 'workspace quota lifecycle', () => {
  let dir: string;
  const log = pino({ level: 'silent' });
  const quota = (bytes = 16 * 1024 * 1024, ownerId = 'exec-a') =>
    new WorkspaceQuota({ bytes, inodes: 0, imagesDir: path.join(dir, 'images'), workspacesDir: path.join(dir, 'workspaces'), ownerId, log });

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-quota-life-'));
    await fs.mkdir(path.join(dir, 'workspaces', 'ws'), { recursive: true });
  });
  afterEach(async () => {
    await unmountUnder(dir);
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** Makes the mark on `ws`'s mount say its process is gone (same pid, another start time): a crashed run. */
  async function markGone(ws: string): Promise<void> {
    const file = path.join(dir, 'images', `${path.basename(ws)}.ext4.owner`);
    const record = JSON.parse(await fs.readFile(file, 'utf8')) as Record<string, unknown>;
    await fs.writeFile(file, JSON.stringify({ ...record, start: '1' }));
  }
  const bootPrefix = () => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim().slice(0, 8);

  it('unmounts at start what a crashed run left mounted, and mounts it again on demand', async () => {
    const ws = path.join(dir, 'workspaces', 'ws');
    const first = quota();
    await first.start();
    await first.attach(ws);
    await fs.writeFile(path.join(ws, 'a.txt'), 'A');
    expect(mountedAt(ws)).toBe(true);
    // "Crash": the first run is gone without detaching, leaving a staging directory too.
    await markGone(ws);
    const goneStaging = path.join(dir, 'images', `.staging-${bootPrefix()}-${process.pid}-1-exec-a-probe-1`);
    await fs.mkdir(goneStaging);
    const second = quota();
    await second.start();
    expect(mountedAt(ws)).toBe(false);
    await expect(fs.access(goneStaging)).rejects.toThrow();
    await second.attach(ws);
    await second.attach(ws); // idempotent
    expect(await fs.readFile(path.join(ws, 'a.txt'), 'utf8')).toBe('A');
    expect((await fs.readdir(ws)).sort()).toEqual(['a.txt']); // no lost+found
    await second.discard(ws);
    expect(mountedAt(ws)).toBe(false);
    await expect(fs.access(path.join(dir, 'images', 'ws.ext4'))).rejects.toThrow();
  });

  it('leaves a live process its mounts under the same executor id (two serves on one data directory)', async () => {
    const ws = path.join(dir, 'workspaces', 'ws');
    const live = quota();
    await live.start();
    await live.attach(ws);
    await fs.writeFile(path.join(ws, 'a.txt'), 'A');
    // Marked as another live process's (pid 1, with its real start time) under the same id.
    const file = path.join(dir, 'images', 'ws.ext4.owner');
    const record = JSON.parse(await fs.readFile(file, 'utf8')) as Record<string, unknown>;
    const initStart = readFileSync('/proc/1/stat', 'utf8').split(') ')[1]!.split(' ')[19];
    await fs.writeFile(file, JSON.stringify({ ...record, pid: 1, start: initStart }));
    const other = quota();
    await other.start();
    expect(mountedAt(ws)).toBe(true);
    await other.detach(ws);
    expect(mountedAt(ws)).toBe(true);
    expect(await fs.readFile(path.join(ws, 'a.txt'), 'utf8')).toBe('A');
    await fs.writeFile(file, JSON.stringify(record));
    await live.detach(ws);
    expect(mountedAt(ws)).toBe(false);
  });

  it("leaves a sibling executor's mounts and staging alone when it starts on the same data directory", async () => {
    const ws = path.join(dir, 'workspaces', 'ws');
    const sibling = quota(undefined, 'exec-b');
    await sibling.start();
    await sibling.attach(ws);
    await fs.writeFile(path.join(ws, 'b.txt'), 'B');
    // A sibling's staging directory, as its start-up probe or a migration holds it for a moment.
    const siblingStaging = path.join(dir, 'images', '.staging-exec-b-probe-1');
    await fs.mkdir(siblingStaging);
    const mine = quota(undefined, 'exec-a');
    await mine.start();
    expect(mountedAt(ws)).toBe(true);
    await expect(fs.access(siblingStaging)).resolves.toBeUndefined();
    // It uses the mount it finds, and its detach leaves the sibling's mount in place.
    await mine.attach(ws);
    expect(await fs.readFile(path.join(ws, 'b.txt'), 'utf8')).toBe('B');
    await mine.detach(ws);
    expect(mountedAt(ws)).toBe(true);
    await sibling.detach(ws);
    expect(mountedAt(ws)).toBe(false);
  });

  it('moves the files of a workspace from before the quota into its image', async () => {
    const ws = path.join(dir, 'workspaces', 'ws');
    await fs.mkdir(path.join(ws, 'sub'));
    await fs.writeFile(path.join(ws, 'sub', 'old.txt'), 'old');
    const q = quota();
    await q.start();
    await q.attach(ws);
    expect(await fs.readFile(path.join(ws, 'sub', 'old.txt'), 'utf8')).toBe('old');
    await q.detach(ws);
    expect(await fs.readdir(ws)).toEqual([]);
  });

  it('refuses to start, saying what to do, when this process cannot mount', async () => {
    // The same start-up, run as nobody: mount(8) refuses an unprivileged user.
    const module = path.resolve(__dirname, '../../dist/executor/workspace-quota.js');
    const script = `const { WorkspaceQuota } = require(${JSON.stringify(module)}); const d = process.argv[1];
      new WorkspaceQuota({ bytes: 16777216, inodes: 0, imagesDir: d + '/images', workspacesDir: d + '/workspaces', ownerId: 'exec-a', log: { warn() {}, info() {} } })
        .start().then(() => console.log('STARTED'), (e) => console.log(e.message));`;
    const scratch = path.join(dir, 'nobody');
    await fs.mkdir(scratch, { mode: 0o777 });
    await fs.chmod(scratch, 0o777);
    await fs.chmod(dir, 0o755);
    const out = execFileSync('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', process.execPath, '-e', script, scratch], {
      encoding: 'utf8',
    });
    expect(out).toMatch(/needs the executor to loop-mount an ext4 image: run it as root, or with CAP_SYS_ADMIN/);
    expect(out).toMatch(/TOOLGATE_WORKSPACE_QUOTA_BYTES=0/);
    expect(out).not.toMatch(/STARTED/);
  });

  it('grows an existing image when the quota is raised', async () => {
    const ws = path.join(dir, 'workspaces', 'ws');
    const small = quota(16 * 1024 * 1024);
    await small.start();
    await small.attach(ws);
    await fs.writeFile(path.join(ws, 'k.txt'), 'kept');
    await small.detach(ws);
    const big = quota(48 * 1024 * 1024);
    await big.attach(ws);
    const df = execFileSync('df', ['-B1', '--output=size', ws], { encoding: 'utf8' }).split('\n')[1]!.trim();
    expect(Number(df)).toBeGreaterThan(40 * 1024 * 1024);
    expect(await fs.readFile(path.join(ws, 'k.txt'), 'utf8')).toBe('kept');
  });
});

describe('workspace quota configuration', () => {
  const { loadConfig } = require('../../shared/config') as typeof import('../../shared/config');
  test.each([
    [undefined, 1024 ** 3],
    ['0', 0],
    ['1G', 1024 ** 3],
    ['512M', 512 * 1024 ** 2],
    ['64MiB', 64 * 1024 ** 2],
    ['1073741824', 1024 ** 3],
  ])('TOOLGATE_WORKSPACE_QUOTA_BYTES=%s is %i bytes', (raw, bytes) => {
    expect(loadConfig(raw === undefined ? {} : { TOOLGATE_WORKSPACE_QUOTA_BYTES: raw }).workspaceQuota).toEqual({ bytes, inodes: 65536 });
  });
  test.each([['1X'], ['-1'], ['4M'], ['1.5G']])('TOOLGATE_WORKSPACE_QUOTA_BYTES=%s is refused, naming the variable', (raw) => {
    expect(() => loadConfig({ TOOLGATE_WORKSPACE_QUOTA_BYTES: raw })).toThrow(/TOOLGATE_WORKSPACE_QUOTA_BYTES/);
  });
  test("a small quota alone gets a default of one inode per KiB (mkfs's floor), not a refusal", () => {
    expect(loadConfig({ TOOLGATE_WORKSPACE_QUOTA_BYTES: '16M' }).workspaceQuota).toEqual({ bytes: 16 * 1024 ** 2, inodes: 16384 });
  });
  test('more inodes than one per KiB is refused', () => {
    expect(() => loadConfig({ TOOLGATE_WORKSPACE_QUOTA_BYTES: '16M', TOOLGATE_WORKSPACE_QUOTA_INODES: '20000' })).toThrow(
      /TOOLGATE_WORKSPACE_QUOTA_INODES must be at most one per KiB of TOOLGATE_WORKSPACE_QUOTA_BYTES \(16384\), got "20000"/,
    );
  });
});
