/** The sandbox backends by name. Asking for one that cannot run is an error, never a fallback. */
import type { SandboxBackendName } from '../../shared/config';
import type { SandboxBackend } from './backend';
import { bwrapBackend, BwrapBackendOptions } from './bwrap';
import { noneBackend } from './none';

export interface BackendOptions {
  onStderr?: (line: string) => void;
  bwrap?: BwrapBackendOptions;
}

export function createBackend(name: SandboxBackendName, options: BackendOptions = {}): SandboxBackend {
  switch (name) {
    case 'none':
      return noneBackend({ onStderr: options.onStderr });
    case 'bwrap':
      return bwrapBackend({ ...options.bwrap, onStderr: options.onStderr });
    case 'docker':
      throw new Error('the docker sandbox backend is not available in this build yet; use none or bwrap');
  }
}
