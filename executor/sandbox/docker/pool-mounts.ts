/**
 * Host mounts for the docker backend's warm pool (warm-pool.ts): how a container started before
 * its tenant was known gets that tenant's workspace, and only it.
 *
 * The pool directory (`<dataDir>/sandbox-pool`) must sit on a mount with shared propagation; when
 * the mount holding it is not shared, it is bound onto itself and made shared (a peer group of its
 * own). Each pre-started container binds its own empty slot, `<pool>/<container name>`, at
 * /workspace with `rslave` propagation. Binding a tenant's workspace onto that slot later makes it
 * appear at that container's /workspace and nowhere else: other containers bind other slots, and
 * a slave's own mount events never travel back to the host. The workspace quota is untouched: the
 * bind shows the same filesystem (the tenant's ext4 image, when there is a quota). A slot is
 * unmounted once its container is gone, before the workspace image may be detached, so the image
 * is never held mounted twice.
 *
 * Needs root (or CAP_SYS_ADMIN) in the mount namespace the Docker host sees the data directory
 * in; docs/deployment.md says what that means for an executor that runs in a container.
 */
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const COMMAND_TIMEOUT_MS = 30_000;

interface MountLine {
  mountPoint: string;
  shared: boolean;
}

export class PoolMounts {
  private prepared: Promise<void> | undefined;

  constructor(readonly dir: string) {}

  /** The pool directory, on a shared mount; once. */
  prepare(): Promise<void> {
    this.prepared ??= this.makeShared().catch((err: unknown) => {
      this.prepared = undefined;
      throw err;
    });
    return this.prepared;
  }

  /** A new empty slot for a container (root's, 0755: nothing in it before a workspace is bound on it). */
  async slot(name: string): Promise<string> {
    await this.prepare();
    const slot = path.join(this.dir, name);
    await fs.mkdir(slot, { mode: 0o755 });
    return slot;
  }

  /** Binds the workspace onto the slot: it appears at the slot's container's /workspace. */
  bind(workspace: string, slot: string): Promise<void> {
    return run('mount', ['--bind', workspace, slot]);
  }

  /** Unmounts the slot (if bound) and removes it; its container must be gone. */
  async release(slot: string): Promise<void> {
    if ((await mounts()).some((m) => m.mountPoint === slot)) await unmount(slot);
    await fs.rmdir(slot).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  /**
   * What a previous run left (it crashed with slots bound): unmounts and removes every slot, and
   * the pool directory's own mount. Call after its containers are removed and before workspace
   * images are checked (a slot may hold one mounted).
   */
  async cleanup(): Promise<number> {
    const inside = (await mounts()).map((m) => m.mountPoint).filter((p) => p.startsWith(this.dir + path.sep));
    for (const p of inside.sort((a, b) => b.length - a.length)) await unmount(p);
    const slots = await fs.readdir(this.dir).catch(() => [] as string[]);
    for (const name of slots) await fs.rmdir(path.join(this.dir, name)).catch(() => undefined);
    await this.close();
    return inside.length;
  }

  /** Unmounts the pool directory's own mount, if this class made one; its slots must be released. */
  async close(): Promise<void> {
    this.prepared = undefined;
    if ((await mounts()).some((m) => m.mountPoint === this.dir)) await unmount(this.dir);
  }

  private async makeShared(): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true, mode: 0o711 });
    const dir = await fs.realpath(this.dir);
    if (dir !== this.dir) throw new Error(`the sandbox pool directory ${this.dir} must be a real path (it resolves to ${dir})`);
    if (holder(await mounts(), dir)?.shared) return;
    await run('mount', ['--bind', dir, dir]);
    await run('mount', ['--make-shared', dir]);
  }
}

/** The mount a path lies on: the longest mount point that is it or above it. */
function holder(lines: readonly MountLine[], p: string): MountLine | undefined {
  let best: MountLine | undefined;
  for (const m of lines) {
    const covers = m.mountPoint === '/' || p === m.mountPoint || p.startsWith(m.mountPoint + path.sep);
    if (covers && (!best || m.mountPoint.length >= best.mountPoint.length)) best = m;
  }
  return best;
}

/** /proc/self/mountinfo: field 5 is the mount point (octal escapes undone), then optional fields up to "-". */
async function mounts(): Promise<MountLine[]> {
  const text = await fs.readFile('/proc/self/mountinfo', 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const fields = line.split(' ');
      const optional = fields.slice(6, fields.indexOf('-'));
      return {
        mountPoint: fields[4]!.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8))),
        shared: optional.some((f) => f.startsWith('shared:')),
      };
    });
}

/**
 * Unmounts; when something still holds it (a container being reaped), detaches it lazily. A mount
 * someone else removed meanwhile (a sandbox's own release racing a clean-up) is not an error.
 */
async function unmount(dir: string): Promise<void> {
  try {
    await run('umount', [dir]);
  } catch {
    try {
      await run('umount', ['-l', dir]);
    } catch (err) {
      if ((await mounts()).some((m) => m.mountPoint === dir)) throw err;
    }
  }
}

async function run(file: string, args: string[]): Promise<void> {
  try {
    await exec(file, args, { timeout: COMMAND_TIMEOUT_MS, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C' } });
  } catch (err) {
    const e = err as { stderr?: string; message?: string };
    throw new Error(`${file} ${args[0]} failed: ${(e.stderr || e.message || String(err)).trim()}`);
  }
}
