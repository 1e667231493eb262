/**
 * A sandbox backend as a registered module (Caddy's model): an id, the section of the config it
 * reads, how to create it, and what an executor does around it. Each backend's file exports its
 * module `satisfies SandboxBackendModule<ItsSection>`; registry.ts lists them once. Lifecycle, at
 * start: look the id up (an unknown id fails with a sentence) → read its section → create →
 * clean what a previous run left (executors) → probe (TenantPool) → use → close.
 * Adding a backend: its module file, one line in registry.ts, one contract test file.
 */
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';
import type { SandboxBackend } from './backend';
import type { SandboxEgress } from './egress-mount';

/**
 * Who creates the backend:
 * - `executor`: many tenants' workspaces under the data directory, each given to its sandbox's
 *   uid before a start (workspaces.ts); a backend may keep sandboxes ready for new tenants;
 * - `stdio`: one root that stays its user's: its ownership is only checked.
 */
export type BackendRole = 'executor' | 'stdio';

export interface BackendDeps {
  role: BackendRole;
  log: Logger;
  /** Each line the sandbox agent writes to stderr. */
  onStderr?: (line: string) => void;
  /**
   * The creator is the one process its clients talk to (`stdio`, `serve` without Redis): a
   * backend without a wall may run the tools right here instead of in an agent child, since a
   * separate process would add only a hop (`none` does: sandbox/in-process.ts). A standalone
   * executor leaves it unset and keeps an agent per tenant.
   */
  embedded?: boolean;
  /**
   * Governed egress (egress-mount.ts): isolating backends give each sandbox its proxy channel and
   * relay. Unset (stdio, tests): sandboxes have no network at all, as before.
   */
  egress?: SandboxEgress;
}

/**
 * Methods, not function properties, on purpose: their parameters are checked bivariantly, so a
 * module of any section fits the registry's list; the registry only ever hands a module's own
 * section back to it.
 */
export interface SandboxBackendModule<Section> {
  /** The TOOLGATE_SANDBOX (and `stdio --sandbox`) value that selects it. */
  readonly id: string;
  /** Its section of the config, read once at start: what `create` and `cleanStale` are given. */
  section(config: Readonly<Config>): Section;
  create(section: Section, deps: BackendDeps): SandboxBackend;
  /**
   * Optional: removes what a previous run of this executor left behind (it crashed or was
   * killed) before the first sandbox starts, and logs what it removed.
   */
  cleanStale?(section: Section, log: Logger): Promise<void>;
  /**
   * Optional, for backends that keep tenants apart by uid: the tenant's sandbox uid. Unset: the
   * backend's own default for every tenant.
   */
  uidFor?(tenant: string): number;
}
