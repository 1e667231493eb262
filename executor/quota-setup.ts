/**
 * Whether this executor enforces the workspace disk quota, decided once at start-up. On an
 * isolating backend (bwrap, docker) with TOOLGATE_WORKSPACE_QUOTA_BYTES > 0 the quota is
 * enforced or the executor does not start: a configured limit that silently does nothing would
 * let one tenant fill the host's disk. `none` cannot enforce it (its tools run as this user on
 * the host's disk) and says so. The sandbox agent is told the quota so it can name it.
 */
import * as path from 'node:path';
import type { Config } from '../shared/config';
import type { ToolLimits } from '../shared/limits';
import type { Logger } from '../shared/log';
import type { WorkspaceQuotaLimits } from '../shared/workspace/quota';
import { WorkspaceQuota } from './workspace-quota';

export interface QuotaSetup {
  quota: WorkspaceQuota | undefined;
  /** The limits to start sandbox agents with: the tool limits, plus the quota when there is one. */
  limits: ToolLimits;
}

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
    ownerId: config.docker.executorId,
    log,
  });
  await quota.start();
  log.info({ quota: quota.description }, 'workspace disk quota enforced (an ext4 image per workspace)');
  const limits: ToolLimits & WorkspaceQuotaLimits = { ...config.limits, workspaceQuotaBytes: bytes, workspaceQuotaInodes: inodes };
  return { quota, limits };
}
