/**
 * Tenants' workspaces, the same on every backend: where they live under the data directory
 * (`<dataDir>/workspaces/<workspaceName(tenant)>`, tenant-names.ts), their disk quota (an ext4
 * image mounted on each, workspace-quota.ts) and their ownership (given to the sandbox's uid
 * before it starts, `ownWorkspace`, which every backend that runs as another uid calls).
 * Workspaces persist after a sandbox stops.
 */
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { Config } from '../shared/config';
import type { ToolLimits } from '../shared/limits';
import type { Logger } from '../shared/log';
import type { WorkspaceQuotaLimits } from '../shared/workspace/quota';
import { workspaceName } from './tenant-names';
import { WorkspaceQuota } from './workspace-quota';

export interface WorkspacesOptions {
  /** The data directory; workspaces go in its `workspaces/` folder. */
  dataDir: string;
  /** The disk quota; unset: workspaces are plain directories on the data directory's disk. */
  quota?: WorkspaceQuota;
  /** True when sandboxes run as per-tenant uids that reach their workspace by its host path (bwrap). */
  perTenantUids: boolean;
  log: Logger;
}

export class Workspaces {
  private readonly dir: string;
  private layout: Promise<void> | undefined;

  constructor(private readonly options: WorkspacesOptions) {
    this.dir = path.join(options.dataDir, 'workspaces');
  }

  /** Host path of a tenant's workspace. */
  pathFor(tenant: string): string {
    return path.join(this.dir, workspaceName(tenant));
  }

  /** A throwaway workspace for the start-up probe: its name starts with "." — no tenant's does. */
  probePath(): string {
    return path.join(this.dir, `.probe-${process.pid}`);
  }

  /** Makes the workspace ready for its sandbox: the layout above it, the directory, its quota mount. */
  async prepare(workspace: string): Promise<void> {
    this.layout ??= this.prepareLayout();
    await this.layout.catch((err: unknown) => {
      this.layout = undefined; // an operator may fix it: try again on the next start
      throw err;
    });
    await fs.mkdir(workspace, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    const st = await fs.lstat(workspace);
    if (!st.isDirectory()) throw new Error(`the workspace ${workspace} is not a directory`);
    await this.options.quota?.attach(workspace);
  }

  /** After its sandbox stopped: unmounts its quota image (the files stay in it). */
  async release(workspace: string): Promise<void> {
    await this.options.quota?.detach(workspace);
  }

  /** Removes a workspace and its quota image (the probe's). */
  async discard(workspace: string): Promise<void> {
    await this.options.quota?.discard(workspace);
    await fs.rm(workspace, { recursive: true, force: true });
  }

  /**
   * `<dataDir>/workspaces`, mode 0711. With per-tenant uids, bwrap opens the workspace as the
   * tenant's uid, so that uid must be able to pass through every directory above it: the data
   * directory gets o+x (search, not list: its secret file stays 0600) and its ancestors must
   * already allow it.
   */
  private async prepareLayout(): Promise<void> {
    const { dataDir, perTenantUids, log } = this.options;
    await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
    await fs.mkdir(this.dir, { recursive: true, mode: 0o711 });
    await fs.chmod(this.dir, 0o711);
    if (!perTenantUids) return;
    const st = await fs.stat(dataDir);
    if ((st.mode & 0o001) === 0) {
      await fs.chmod(dataDir, (st.mode & 0o7777) | 0o001);
      log.info({ dataDir }, 'data directory made searchable by sandbox uids (o+x, not listable)');
    }
    for (let dir = path.dirname(dataDir); ; dir = path.dirname(dir)) {
      if (((await fs.stat(dir)).mode & 0o001) === 0) {
        throw new Error(
          `sandbox uids cannot reach their workspaces: ${dir}, above the data directory ${dataDir}, is not searchable by other users (chmod o+x, or choose another TOOLGATE_DATA_DIR)`,
        );
      }
      if (dir === path.dirname(dir)) break;
    }
  }
}

/** The file in a data directory that names it (see dataDirectoryId). */
export const DATA_DIR_ID_FILE = 'data-dir-id';

/**
 * The data directory's id: made at random at its first use and kept in it, so that executors
 * sharing one data directory (one host, or shared storage) name it alike and those with their
 * own tell theirs apart (workspace-homes.ts).
 */
export async function dataDirectoryId(dataDir: string): Promise<string> {
  const file = path.join(dataDir, DATA_DIR_ID_FILE);
  await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
  // Written whole, then linked into place: an executor starting beside this one reads a whole id or none.
  const draft = `${file}.${process.pid}.${randomUUID()}`;
  await fs.writeFile(draft, `${randomUUID()}\n`, { mode: 0o644 });
  try {
    await fs.link(draft, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await fs.rm(draft, { force: true });
  }
  const id = (await fs.readFile(file, 'utf8')).trim();
  if (!id) throw new Error(`${file} is empty: remove it, and the executor makes a new one (its tenants' workspace records then name another data directory)`);
  return id;
}

/**
 * Ownership, before a sandbox of `uid`:`gid` starts on `workspace`: it must exist (a bind mount
 * would otherwise create it, owned by root) and be writable by that uid. With `chown` (executors:
 * their workspaces are theirs to give) it is given to the uid first; otherwise (`stdio`: a user's
 * own root) it is only checked.
 */
export async function ownWorkspace(workspace: string, uid: number, gid: number, chown: boolean): Promise<void> {
  let st = await fs.stat(workspace).catch((err: NodeJS.ErrnoException) => {
    throw new Error(err.code === 'ENOENT' ? `the workspace ${workspace} does not exist` : `the workspace ${workspace} cannot be used: ${err.message}`);
  });
  if (!st.isDirectory()) throw new Error(`the workspace ${workspace} is not a directory`);
  if (chown && (st.uid !== uid || st.gid !== gid)) {
    await fs.chown(workspace, uid, gid);
    st = await fs.stat(workspace);
  }
  const writable = st.uid === uid ? (st.mode & 0o200) !== 0 : st.gid === gid ? (st.mode & 0o020) !== 0 : (st.mode & 0o002) !== 0;
  if (!writable) {
    throw new Error(
      `the workspace ${workspace} is not writable by the sandbox user ${uid}: run \`chown -R ${uid}:${gid} ${workspace}\` or choose another root`,
    );
  }
}

export interface QuotaSetup {
  quota: WorkspaceQuota | undefined;
  /** The limits to start sandbox agents with: the tool limits, plus the quota when there is one. */
  limits: ToolLimits;
}

/**
 * Whether this executor enforces the workspace disk quota, decided once at start-up. On an
 * isolating backend (bwrap, docker) with TOOLGATE_WORKSPACE_QUOTA_BYTES > 0 the quota is
 * enforced or the executor does not start: a configured limit that silently does nothing would
 * let one tenant fill the host's disk. `none` cannot enforce it (its tools run as this user on
 * the host's disk) and says so. The sandbox agent is told the quota so it can name it.
 */
export async function startWorkspaceQuota(config: Readonly<Config>, isolating: boolean, log: Logger): Promise<QuotaSetup> {
  const { bytes, inodes } = config.workspaceQuota;
  if (bytes === 0) {
    if (isolating)
      log.warn({ sandbox: config.sandbox }, "workspace disk quota disabled (TOOLGATE_WORKSPACE_QUOTA_BYTES=0): a tenant can fill the data directory's disk");
    return { quota: undefined, limits: config.limits };
  }
  if (!isolating) {
    log.warn(
      { sandbox: config.sandbox },
      'sandbox "none" does not enforce the workspace disk quota (TOOLGATE_WORKSPACE_QUOTA_BYTES): use bwrap or docker for that',
    );
    return { quota: undefined, limits: config.limits };
  }
  const quota = new WorkspaceQuota({
    bytes,
    inodes,
    imagesDir: path.join(config.dataDir, 'workspace-images'),
    workspacesDir: path.join(config.dataDir, 'workspaces'),
    ownerId: config.executor.id,
    log,
  });
  await quota.start();
  log.info({ quota: quota.description }, 'workspace disk quota enforced (an ext4 image per workspace)');
  const limits: ToolLimits & WorkspaceQuotaLimits = { ...config.limits, workspaceQuotaBytes: bytes, workspaceQuotaInodes: inodes };
  return { quota, limits };
}
