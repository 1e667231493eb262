import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { SandboxBackend } from '../../executor/sandbox/backend';
import { dockerBackend } from '../../executor/sandbox/docker/backend';
import { cleanupStaleSandboxes } from '../../executor/sandbox/docker/stale';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { describeIf, isRoot } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, SANDBOX_IMAGE, sandboxContainers } from '../helpers/docker';
import { sandboxBackendContract } from './sandbox-backend.suite';

describeIf(!dockerUnavailable, dockerUnavailable ?? '', 'docker backend', () => {
  beforeAll(() => ensureSandboxImage(), 180_000);

  sandboxBackendContract('docker', {
    backend: () => dockerBackend({ image: SANDBOX_IMAGE }),
    makeWorkspace: (dir) => fs.chown(dir, 65534, 65534),
  });

  it('leaves no container behind', () => {
    expect(sandboxContainers('contract')).toEqual([]);
  });
});

// The same contract for sandboxes taken from the warm pool (pre-started, bound on first use).
const poolWhy = dockerUnavailable ?? (isRoot ? undefined : 'the warm pool mounts workspaces: run as root');
describeIf(poolWhy === undefined, poolWhy ?? '', 'docker backend, warm pool', () => {
  const executorId = `contract-pool-${process.pid}`;
  let dataDir: string;
  let pooled: SandboxBackend;
  const poolErrors: string[] = [];

  beforeAll(async () => {
    await ensureSandboxImage();
    dataDir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-contract-pool-')));
    pooled = dockerBackend({
      image: SANDBOX_IMAGE,
      executorId,
      dataDir,
      hostDataDir: dataDir,
      poolSize: 1,
      onPoolError: (err) => poolErrors.push(String(err)),
    });
    await pooled.warm!(DEFAULT_LIMITS);
  }, 180_000);
  afterAll(async () => {
    await pooled?.close?.();
    await cleanupStaleSandboxes(executorId, { dataDir });
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  sandboxBackendContract('docker-pooled', {
    backend: () => pooled,
    makeWorkspace: (dir) => fs.chown(dir, 65534, 65534),
  });

  it('served every case from the pool (no bind failed over to a fresh start), and leaves no tenant container behind', () => {
    expect(poolErrors).toEqual([]);
    expect(sandboxContainers('contract')).toEqual([]);
  });
});
