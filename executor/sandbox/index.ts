/** The sandbox backends by name. Asking for one that cannot run is an error, never a fallback. */
import type { SandboxBackendName } from '../../shared/config';
import type { SandboxBackend } from './backend';
import { bwrapBackend, BwrapBackendOptions } from './bwrap';
import type { DockerBackendOptions } from './docker';
import { noneBackend } from './none';

export interface BackendOptions {
  onStderr?: (line: string) => void;
  bwrap?: BwrapBackendOptions;
  /** For docker: `{ ...config.docker, dataDir: config.dataDir, chownWorkspace: true }` in an executor. */
  docker?: DockerBackendOptions;
}

export function createBackend(name: SandboxBackendName, options: BackendOptions = {}): SandboxBackend {
  switch (name) {
    case 'none':
      return noneBackend({ onStderr: options.onStderr });
    case 'bwrap':
      return bwrapBackend({ ...options.bwrap, onStderr: options.onStderr });
    case 'docker': {
      // Loaded only when asked for: dockerode takes 100+ ms to load, which `stdio` on none or bwrap should not pay.
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load, on purpose (above)
      const { dockerBackend } = require('./docker') as typeof import('./docker');
      return dockerBackend({ ...options.docker, onStderr: options.onStderr });
    }
  }
}
