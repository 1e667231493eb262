/** What a previous run of an executor left on the Docker host, and its removal. */
import * as path from 'node:path';
import { dockerClient } from './client';
import { EXECUTOR_LABEL, SANDBOX_LABEL } from './container';
import { PoolMounts } from './pool-mounts';

/** Where the warm pool's slots live, under a data directory. */
export function poolDirFor(dataDir: string): string {
  return path.join(dataDir, 'sandbox-pool');
}

/**
 * Removes the sandbox containers a previous run of this executor left behind (it crashed, or
 * was killed before it could stop them): every container labelled with its executor id. The
 * docker module runs it once at executor start-up, before the first sandbox starts. Executor
 * ids must be unique per Docker host, or one executor would remove another's sandboxes.
 * With `dataDir`, the warm pool's slots under it are unmounted and removed too (before workspace
 * images are checked: a slot may still hold one mounted). Resolves with how many containers it removed.
 */
export async function cleanupStaleSandboxes(executorId: string, options: { socketPath?: string; dataDir?: string } = {}): Promise<number> {
  const docker = dockerClient(options.socketPath);
  const stale = await docker.listContainers({ all: true, filters: { label: [`${SANDBOX_LABEL}=1`, `${EXECUTOR_LABEL}=${executorId}`] } });
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
