/**
 * The docker backend as a registered module. dockerode takes 100+ ms to load, which a process on
 * another backend (stdio on none or bwrap) must not pay: this file loads only types, and the
 * backend and its clean-up are required when first used.
 */
/* eslint-disable @typescript-eslint/no-require-imports -- lazy loads, on purpose (above) */
import type { DockerSandboxConfig } from '../../../shared/config';
import type { SandboxBackendModule } from '../module';

export interface DockerSection extends DockerSandboxConfig {
  /** The executor's id (TOOLGATE_EXECUTOR_ID): labels its containers for `cleanStale`. */
  executorId: string;
  dataDir: string;
}

export const dockerModule = {
  id: 'docker',
  section: (config) => ({ ...config.docker, executorId: config.executor.id, dataDir: config.dataDir }),
  create(section, deps) {
    const { dockerBackend } = require('./backend') as typeof import('./backend');
    const { dataDir, hostDataDir, poolSize, ...container } = section;
    return dockerBackend({
      ...container,
      // An executor's workspaces live in its data directory (bind-mounted by their path as the
      // Docker host sees it) and are handed to the sandbox uid; stdio's root is its user's.
      ...(deps.role === 'executor' ? { dataDir, hostDataDir, poolSize, chownWorkspace: true } : {}),
      onStderr: deps.onStderr,
      egress: deps.egress,
      onPoolError: (err) => deps.log.warn({ err }, 'docker sandbox warm pool: a pre-started sandbox failed; new tenants start fresh ones meanwhile'),
    });
  },
  // Sandboxes a previous run of this executor left behind go first: they may hold workspace mounts.
  async cleanStale(section, log) {
    const { cleanupStaleSandboxes } = require('./stale') as typeof import('./stale');
    const removed = await cleanupStaleSandboxes(section.executorId, { dataDir: section.dataDir });
    if (removed > 0) log.warn({ removed, executorId: section.executorId }, 'removed sandboxes left by a previous run');
  },
} satisfies SandboxBackendModule<DockerSection>;
