/**
 * The sandbox backends, listed once. The executor and the bin commands find a backend here and
 * nowhere else. The list is checked when this file loads: a duplicate id stops every process
 * that uses it at start, with a sentence. docker's module loads dockerode only when created.
 */
import { ConfigError } from '../../shared/config';
import { bwrapModule } from './bwrap';
import { dockerModule } from './docker/module';
import type { SandboxBackendModule } from './module';
import { noneModule } from './none';

export interface BackendRegistry {
  /** Every id, in the order listed. */
  readonly ids: readonly string[];
  /** The module with this id, or undefined. */
  find(id: string): SandboxBackendModule<unknown> | undefined;
  /** The module with this id; an unknown one fails with a sentence naming `setting` and every id. */
  get(id: string, setting?: string): SandboxBackendModule<unknown>;
}

export function createRegistry(modules: readonly SandboxBackendModule<unknown>[]): BackendRegistry {
  const byId = new Map<string, SandboxBackendModule<unknown>>();
  for (const module of modules) {
    if (byId.has(module.id)) throw new Error(`two sandbox backends are registered with the id "${module.id}": each id must name exactly one module`);
    byId.set(module.id, module);
  }
  const ids = Object.freeze([...byId.keys()]);
  return {
    ids,
    find: (id) => byId.get(id),
    get(id, setting = 'TOOLGATE_SANDBOX') {
      const module = byId.get(id);
      if (!module) throw new ConfigError(`${setting} must be one of ${ids.join(', ')}, got "${id}"`);
      return module;
    },
  };
}

export const SANDBOX_BACKENDS = createRegistry([noneModule, bwrapModule, dockerModule]);
