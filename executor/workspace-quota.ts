/**
 * The workspace disk quota (TOOLGATE_WORKSPACE_QUOTA_BYTES / _INODES): each tenant's workspace
 * is its own ext4 filesystem, a sparse image file loop-mounted on the workspace directory on the
 * host before the sandbox binds it. The kernel enforces both limits: a write past them fails
 * with ENOSPC inside the sandbox (bwrap and docker alike, since both bind the host directory),
 * and the host's disk loses at most the image's size to a tenant. It needs root (or
 * CAP_SYS_ADMIN and /dev/loop*), which the bwrap and docker backends have here; docs/deployment.md
 * explains the choice over tmpfs (volatile) and project quotas (the host filesystem's option).
 *
 * Lifecycle, driven by the TenantPool:
 *   start()   — at executor start-up: checks the privilege (probe-mounts a tiny image) and
 *               unmounts what a run that is gone left mounted under workspaces/; several
 *               executors may share one data directory (docs/executor.md), so each mount is
 *               marked with the process that made it (`<image>.owner`, process-owner.ts) and the
 *               staging directories carry it in their names: a start never touches a live one's;
 *   attach()  — before a tenant's sandbox starts: creates the image on first use (moving any
 *               files of a workspace that predates the quota into it), grows it when the quota
 *               was raised, mounts it; a no-op when already mounted;
 *   detach()  — after the sandbox stopped (idle, evicted, shutdown): unmounts; the image stays,
 *               so the files persist and the next attach mounts them again;
 *   discard() — unmounts and deletes the image (the start-up probe's throwaway workspace).
 * Calls for one workspace run one after another, never interleaved.
 */
import { execFile } from 'node:child_process';
import { constants, promises as fs } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '../shared/log';
import { describeQuota } from '../shared/workspace/quota';
import { currentOwner, mayCleanUp, OwnerRecord, ownerState, parseOwner, sameOwner } from './process-owner';

const exec = promisify(execFile);

export interface WorkspaceQuotaOptions {
  /** Size of each workspace filesystem, in bytes (> 0). */
  bytes: number;
  /** Inodes (files, directories, links) per workspace; 0: mkfs's default for the size. */
  inodes: number;
  /** Where the images live: `<dataDir>/workspace-images`, outside every sandbox's view. */
  imagesDir: string;
  /** The directory holding every workspace, for the stale clean-up at start. */
  workspacesDir: string;
  /** This executor's id (TOOLGATE_EXECUTOR_ID): what it mounted is marked with it. */
  ownerId: string;
  log: Logger;
}

/** ext4 needs room for its superblocks, inode tables and journal; below this mkfs refuses or the journal eats the quota. */
export const MIN_QUOTA_BYTES = 8 * 1024 * 1024;
const MOUNT_OPTIONS = 'loop,nosuid,nodev,noatime';
const COMMAND_TIMEOUT_MS = 60_000;

export class WorkspaceQuota {
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly owner: OwnerRecord;
  /** Prefix of this process's staging directories: its boot, pid and start time, then the id made safe for a file name. */
  private readonly staging: string;

  constructor(private readonly options: WorkspaceQuotaOptions) {
    if (options.bytes < MIN_QUOTA_BYTES) throw new RangeError(`a workspace quota must be at least ${MIN_QUOTA_BYTES} bytes`);
    this.owner = currentOwner(options.ownerId);
    this.staging = stagingPrefix(this.owner);
  }

  /** "1 GiB, 65536 files": the quota as callers read it in error messages. */
  get description(): string {
    return describeQuota(this.options.bytes, this.options.inodes);
  }

  /** Checks this process may loop-mount, then unmounts what a previous run left mounted. */
  async start(): Promise<void> {
    await fs.mkdir(this.options.imagesDir, { recursive: true, mode: 0o700 });
    await this.checkPrivilege();
    const stale: string[] = [];
    for (const m of await mountPoints()) {
      if (isInside(m, this.options.imagesDir) ? this.isStaleStaging(path.basename(m)) : isInside(m, this.options.workspacesDir) && (await this.isStale(m)))
        stale.push(m);
    }
    // Deepest first, so nothing is left busy by a mount below it.
    for (const mount of stale.sort((a, b) => b.length - a.length)) {
      await unmount(mount);
      if (isInside(mount, this.options.workspacesDir)) await fs.rm(this.ownerFile(mount), { force: true });
    }
    for (const name of await fs.readdir(this.options.imagesDir)) {
      if (this.isStaleStaging(name)) await fs.rm(path.join(this.options.imagesDir, name), { recursive: true, force: true });
    }
    if (stale.length > 0) this.options.log.warn({ unmounted: stale.length }, 'unmounted workspace images a run that is gone left mounted');
  }

  /** Mounts the workspace's image on it, creating the image first if it has none. */
  attach(workspace: string): Promise<void> {
    return this.serial(workspace, async () => {
      if (await isMountPoint(workspace)) return;
      const image = this.imageFor(workspace);
      const created = await this.provision(image, workspace);
      if (!created) await this.grow(image);
      // Marked before it is mounted: another process starting meanwhile must never see it unmarked.
      await fs.writeFile(this.ownerFile(workspace), JSON.stringify(this.owner), { mode: 0o600 });
      await mount(image, workspace).catch(async (err: unknown) => {
        await fs.rm(this.ownerFile(workspace), { force: true });
        throw err;
      });
      if (created) {
        // The new filesystem's root replaces the directory: keep it closed to other users
        // (the backend hands it to the sandbox uid) and without mkfs's lost+found.
        await fs.rmdir(path.join(workspace, 'lost+found')).catch(() => undefined);
        await fs.chmod(workspace, 0o700);
      }
    });
  }

  /** Unmounts the workspace (its image stays), unless another process mounted it. */
  detach(workspace: string): Promise<void> {
    return this.serial(workspace, async () => {
      if ((await isMountPoint(workspace)) && (await this.isMine(workspace))) {
        await unmount(workspace);
        await fs.rm(this.ownerFile(workspace), { force: true });
      }
    });
  }

  /** Unmounts the workspace and deletes its image: its files are gone. */
  discard(workspace: string): Promise<void> {
    return this.serial(workspace, async () => {
      if (await isMountPoint(workspace)) await unmount(workspace);
      await fs.rm(this.ownerFile(workspace), { force: true });
      await fs.rm(this.imageFor(workspace), { force: true });
    });
  }

  private imageFor(workspace: string): string {
    return path.join(this.options.imagesDir, `${path.basename(workspace)}.ext4`);
  }

  /** Names the executor that mounted the workspace's image. */
  private ownerFile(workspace: string): string {
    return `${this.imageFor(workspace)}.owner`;
  }

  /** True unless another process marks the mount (no mark: a run from before the marks). */
  private async isMine(workspace: string): Promise<boolean> {
    const text = await fs.readFile(this.ownerFile(workspace), 'utf8').catch(() => undefined);
    if (text === undefined) return true;
    const owner = parseOwner(text);
    return ownerState(owner) === 'unknown' ? owner.id === this.owner.id : sameOwner(owner, this.owner);
  }

  /** Left mounted by this process or a run that is gone (see mayCleanUp); unmarked: a run from before the marks. */
  private async isStale(workspace: string): Promise<boolean> {
    const text = await fs.readFile(this.ownerFile(workspace), 'utf8').catch(() => undefined);
    return text === undefined || mayCleanUp(parseOwner(text), this.owner);
  }

  /** A staging directory (or its mount) whose process is gone: named by stagingPrefix, or by the id alone (older runs). */
  private isStaleStaging(name: string): boolean {
    const match = /^\.staging-([0-9a-f]{8})-(\d+)-(\d+)-/.exec(name);
    if (!match) return name.startsWith(`.staging-${safeName(this.owner.id)}-`);
    const [, boot, pid, start] = match;
    if (boot !== this.owner.boot.slice(0, 8)) return false; // another host's, or an earlier boot's: cannot tell
    // A staging name carries no pid namespace: judged in ours, as before the records had one.
    return ownerState({ host: this.owner.host, boot: this.owner.boot, pid: Number(pid), start, pidns: this.owner.pidns }) === 'dead';
  }

  /** Creates the image if missing; true when it did. Files already in the workspace are moved into it. */
  private async provision(image: string, workspace: string): Promise<boolean> {
    if (await exists(image)) return false;
    const partial = `${image}.new`;
    await fs.rm(partial, { force: true });
    await makeImage(partial, this.options.bytes, this.options.inodes);
    if ((await fs.readdir(workspace)).length > 0) await this.moveInto(partial, workspace);
    await fs.rename(partial, image);
    this.options.log.info({ workspace: path.basename(workspace), quota: this.description }, 'workspace image created');
    return true;
  }

  /**
   * A workspace from before the quota: its files go into the new image, so the mount does not
   * hide them. If they do not fit, the start fails (the files stay where they were) and says so.
   */
  private async moveInto(image: string, workspace: string): Promise<void> {
    const staging = path.join(this.options.imagesDir, `${this.staging}${path.basename(workspace)}`);
    await fs.mkdir(staging, { recursive: true, mode: 0o700 });
    await mount(image, staging);
    try {
      await fs.rmdir(path.join(staging, 'lost+found')).catch(() => undefined);
      await run('cp', ['-a', '--', `${workspace}/.`, `${staging}/`]).catch((err: unknown) => {
        throw new Error(`the files already in ${workspace} do not fit its quota (${this.description}): ${String(err)}`);
      });
    } finally {
      await unmount(staging);
      await fs.rmdir(staging).catch(() => undefined);
    }
    for (const name of await fs.readdir(workspace)) await fs.rm(path.join(workspace, name), { recursive: true, force: true });
    this.options.log.info({ workspace: path.basename(workspace) }, 'existing workspace files moved into its new image');
  }

  /** A raised quota grows existing images (offline, before mounting); a lowered one applies to new images only. */
  private async grow(image: string): Promise<void> {
    const { size } = await fs.stat(image);
    if (size >= this.options.bytes) {
      if (size > this.options.bytes)
        this.options.log.warn(
          { image: path.basename(image), size, quota: this.options.bytes },
          'workspace image is larger than the quota: shrinking is not supported, it keeps its size',
        );
      return;
    }
    await run('e2fsck', ['-f', '-p', image], [0, 1]); // 1: it corrected something, which is fine
    await fs.truncate(image, this.options.bytes);
    await run('resize2fs', ['-p', image]);
    this.options.log.info({ image: path.basename(image), from: size, to: this.options.bytes }, 'workspace image grown to the quota');
  }

  private async checkPrivilege(): Promise<void> {
    const probe = path.join(this.options.imagesDir, `${this.staging}probe-${process.pid}`);
    const image = `${probe}.ext4`;
    try {
      await fs.mkdir(probe, { recursive: true, mode: 0o700 });
      await makeImage(image, MIN_QUOTA_BYTES, 0);
      await mount(image, probe);
      await unmount(probe);
    } catch (err) {
      throw new Error(
        `the workspace quota (TOOLGATE_WORKSPACE_QUOTA_BYTES) needs the executor to loop-mount an ext4 image: run it as root, or with CAP_SYS_ADMIN and access to /dev/loop-control and /dev/loop* (see docs/deployment.md), or set TOOLGATE_WORKSPACE_QUOTA_BYTES=0 to run without a disk quota. The mount failed: ${message(err)}`,
      );
    } finally {
      await fs.rm(image, { force: true });
      await fs.rmdir(probe).catch(() => undefined);
    }
  }

  private serial<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(key) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(task);
    const settled = next.catch(() => undefined);
    this.queues.set(key, settled);
    void settled.then(() => {
      if (this.queues.get(key) === settled) this.queues.delete(key);
    });
    return next;
  }
}

const safeName = (id: string) => id.replace(/[^A-Za-z0-9._-]/g, '_');

function stagingPrefix(owner: OwnerRecord): string {
  return `.staging-${owner.boot.replace(/-/g, '').slice(0, 8).padEnd(8, '0')}-${owner.pid}-${owner.start}-${safeName(owner.id)}-`;
}

/** A sparse file of `bytes` holding a fresh ext4: no reserved blocks (the tenant gets it all), root-owned root. */
async function makeImage(image: string, bytes: number, inodes: number): Promise<void> {
  const handle = await fs.open(image, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
  try {
    await handle.truncate(bytes);
  } finally {
    await handle.close();
  }
  await run('mkfs.ext4', ['-q', '-F', '-m', '0', ...(inodes > 0 ? ['-N', String(inodes)] : []), '-E', 'root_owner=0:0,nodiscard', image]);
}

async function mount(image: string, dir: string): Promise<void> {
  await run('mount', ['-t', 'ext4', '-o', MOUNT_OPTIONS, image, dir]);
}

/** Unmounts; when something still holds it (a sandbox process being reaped), detaches it lazily. */
async function unmount(dir: string): Promise<void> {
  try {
    await run('umount', [dir]);
  } catch {
    await run('umount', ['-l', dir]);
  }
}

async function run(file: string, args: string[], okCodes: readonly number[] = [0]): Promise<void> {
  try {
    await exec(file, args, { timeout: COMMAND_TIMEOUT_MS, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C' } });
  } catch (err) {
    const e = err as { stderr?: string; message?: string; code?: unknown };
    if (typeof e.code === 'number' && okCodes.includes(e.code)) return;
    throw new Error(`${file} failed: ${(e.stderr || e.message || String(err)).trim()}`);
  }
}

/** Mount points in this process's mount namespace (/proc/self/mountinfo, field 5, octal escapes undone). */
async function mountPoints(): Promise<string[]> {
  const text = await fs.readFile('/proc/self/mountinfo', 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' ')[4]!.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8))));
}

async function isMountPoint(dir: string): Promise<boolean> {
  return (await mountPoints()).includes(path.resolve(dir));
}

function isInside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
