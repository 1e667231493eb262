/** What a previous run of an executor left on the Docker host, and its removal. */
import * as path from 'node:path';
import { dockerClient } from './client';
import { currentOwner, mayCleanUp, parseOwner } from '../../process-owner';
import { EXECUTOR_LABEL, OWNER_LABEL, SANDBOX_LABEL } from './container';
import { PoolMounts } from './pool-mounts';

/** Where the warm pool's slots live, under a data directory. */
export function poolDirFor(dataDir: string): string {
  return path.join(dataDir, 'sandbox-pool');
}

/**
 * Removes the sandbox containers this process or a run that is gone left behind (it crashed, or was killed
 * before it could stop them): those whose owner (OWNER_LABEL) provably no longer runs, and those
 * under this executor id whose owner cannot be checked (another host's, or a run from before the
 * owner label), never a live process's, whatever its id (process-owner.ts). The docker module
 * runs it once at executor start-up, before the first sandbox starts.
 * With `dataDir`, the warm pool's slots under it are unmounted and removed too (before workspace
 * images are checked: a slot may still hold one mounted). Resolves with how many containers it removed.
 */
export async function cleanupStaleSandboxes(executorId: string, options: { socketPath?: string; dataDir?: string } = {}): Promise<number> {
  const docker = dockerClient(options.socketPath);
  const listed = await docker.listContainers({ all: true, filters: { label: [`${SANDBOX_LABEL}=1`] } });
  const self = currentOwner(executorId);
  const stale = listed.filter((c) => {
    const owner = c.Labels[OWNER_LABEL];
    return mayCleanUp(owner === undefined ? { id: c.Labels[EXECUTOR_LABEL] ?? '' } : parseOwner(owner), self);
  });
  await Promise.all(
    stale.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
  // The warm pool's slots (one may still hold a workspace bound) go once their containers have.
  if (options.dataDir) await new PoolMounts(poolDirFor(options.dataDir)).cleanup();
  return stale.length;
}
