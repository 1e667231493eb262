/**
 * One sandbox per tenant on this executor. A tenant's sandbox starts on its first call
 * (concurrent first calls share that one start), serves its calls while alive, starts again
 * on the next call if it died, and stops once it has had no running call for `idleMs` — its
 * background processes (start_process) end with it. At most `maxSandboxes` live at once: a new
 * tenant displaces the least recently used idle one, and when every slot is busy the call fails
 * Unavailable (retry later) rather than queueing behind other tenants' work.
 *
 * Workspaces (their place, quota mount and layout: workspaces.ts) are prepared before a
 * sandbox starts and released once it has stopped. Sandbox start and stop are published on the
 * bus (`sandbox.started`, `sandbox.stopped`).
 */
import type { BusEvent } from '../shared/bus/events';
import type { ToolLimits } from '../shared/limits';
import type { Logger } from '../shared/log';
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';
import type { ToolResult } from '../shared/tools/tool';
import type { ProcessBudget } from './process-budget';
import type { Sandbox, SandboxBackend } from './sandbox/backend';
import type { WorkspaceQuota } from './workspace-quota';
import { Workspaces } from './workspaces';

export interface TenantPoolOptions {
  backend: SandboxBackend;
  /** The data directory; workspaces go in its `workspaces/` folder. */
  dataDir: string;
  limits: ToolLimits;
  idleMs: number;
  maxSandboxes: number;
  /** For backends that separate tenants by uid: the tenant's uid. Unset: the backend's default. */
  uidFor?: (tenant: string) => number;
  /** The workspace disk quota; unset: workspaces are plain directories on the data directory's disk. */
  quota?: WorkspaceQuota;
  /** Live processes per identity, counted across executors; unset: only TOOLGATE_MAX_PROCESSES per sandbox. */
  processes?: ProcessBudget;
  publish: (event: BusEvent) => void;
  log: Logger;
}

interface Entry {
  readonly tenant: string;
  readonly workspace: string;
  readonly uid: number | undefined;
  /** The sandbox, or its start in progress; undefined before the first start and after a death. */
  sandbox: Promise<Sandbox> | undefined;
  /** Calls holding this entry (waiting for the start or running). */
  busy: number;
  lastUsed: number;
  idleTimer: NodeJS.Timeout | undefined;
  /** Set once the pool stops this sandbox on purpose, so its exit is not reported as a death. */
  retired: boolean;
}

/** Reasons in `sandbox.stopped` events and logs are ours or the agent's exit status, kept short. */
const MAX_REASON_CHARS = 200;

export class TenantPool {
  private readonly entries = new Map<string, Entry>();
  /** Sandboxes being stopped, by tenant: a new start for that tenant waits, so two never share a workspace. */
  private readonly stopping = new Map<string, Promise<void>>();
  private readonly workspaces: Workspaces;
  private closed = false;

  constructor(private readonly options: TenantPoolOptions) {
    this.workspaces = new Workspaces({ dataDir: options.dataDir, quota: options.quota, perTenantUids: options.uidFor !== undefined, log: options.log });
  }

  /** Host path of a tenant's workspace. */
  workspaceFor(tenant: string): string {
    return this.workspaces.pathFor(tenant);
  }

  /** Tenants with a sandbox held by the pool (live, starting, or to restart on the next call). */
  get tenants(): string[] {
    return [...this.entries.keys()];
  }

  /** Runs a sandbox tool in the tenant's sandbox. Rejects with a ProtocolError (Unavailable, Cancelled, Timeout). */
  async call(tenant: string, tool: string, args: unknown, signal: AbortSignal, onProgress?: (message: string) => void): Promise<ToolResult> {
    const entry = this.acquire(tenant);
    try {
      const sandbox = await this.live(entry);
      if (signal.aborted) throw abortReason(signal);
      const run = (callSignal: AbortSignal) => sandbox.call(tool, args, callSignal, onProgress);
      return await (this.options.processes ? this.options.processes.run(tenant, tool, sandbox, signal, run) : run(signal));
    } finally {
      this.release(entry);
    }
  }

  /**
   * Starts and stops one throwaway sandbox, so a backend that cannot run here (missing
   * bubblewrap, an unreachable data directory, an unbuilt agent) fails start-up with its reason
   * instead of every tenant's first call.
   */
  async probe(): Promise<void> {
    const workspace = this.workspaces.probePath();
    await this.workspaces.discard(workspace);
    try {
      await this.workspaces.prepare(workspace);
      const sandbox = await this.options.backend.start({ workspace, limits: this.options.limits, tenant: '(probe)', uid: this.options.uidFor?.('(probe)') });
      await sandbox.stop();
    } finally {
      await this.workspaces.discard(workspace);
    }
    // The backend works: let it get ready for the first tenants (docker's warm pool) in the background.
    void this.options.backend.warm?.(this.options.limits);
  }

  /** Stops every sandbox; later calls fail Unavailable. Running calls fail as their agent exits. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.entries.values()].map((e) => this.retire(e, 'shutdown')));
    await Promise.all([...this.stopping.values()]);
    await this.options.backend.close?.();
  }

  /**
   * Stops the sandboxes of the tenants `moved` picks (their shard went to another executor), so
   * the new owner never shares a workspace, or its quota image, with this one. A tenant with a
   * call still running keeps its sandbox until it ends idle.
   */
  async stopMoved(moved: (tenant: string) => boolean): Promise<void> {
    await Promise.all([...this.entries.values()].filter((e) => e.busy === 0 && moved(e.tenant)).map((e) => this.retire(e, 'moved')));
  }

  private acquire(tenant: string): Entry {
    if (this.closed) throw new ProtocolError(ErrorCode.Unavailable, 'Unavailable: the executor is shutting down');
    let entry = this.entries.get(tenant);
    if (!entry) {
      if (this.entries.size >= this.options.maxSandboxes) this.evictOne();
      entry = {
        tenant,
        workspace: this.workspaceFor(tenant),
        uid: this.options.uidFor?.(tenant),
        sandbox: undefined,
        busy: 0,
        lastUsed: Date.now(),
        idleTimer: undefined,
        retired: false,
      };
      this.entries.set(tenant, entry);
    }
    entry.busy++;
    clearTimeout(entry.idleTimer);
    entry.idleTimer = undefined;
    return entry;
  }

  private release(entry: Entry): void {
    entry.busy--;
    entry.lastUsed = Date.now();
    if (entry.busy > 0 || entry.retired) return;
    if (!entry.sandbox) {
      // Died or never started, and nobody is waiting: nothing to keep.
      this.forget(entry);
      return;
    }
    entry.idleTimer = setTimeout(() => void this.retire(entry, 'idle'), this.options.idleMs);
    entry.idleTimer.unref();
  }

  /** Makes room for a new tenant: stops the least recently used idle sandbox, or refuses. */
  private evictOne(): void {
    let victim: Entry | undefined;
    for (const e of this.entries.values()) if (e.busy === 0 && (!victim || e.lastUsed < victim.lastUsed)) victim = e;
    if (!victim) {
      throw new ProtocolError(ErrorCode.Unavailable, `Unavailable: too many active sandboxes on this executor (${this.options.maxSandboxes}); retry later`);
    }
    void this.retire(victim, 'evicted');
  }

  /** The entry's live sandbox: the current one, the start in progress, or a new start. */
  private async live(entry: Entry): Promise<Sandbox> {
    const pending = entry.sandbox ?? this.startFor(entry);
    const sandbox = await pending; // a failed start rejects every call that waited for it
    if (sandbox.alive) return sandbox;
    if (entry.retired) throw new ProtocolError(ErrorCode.Unavailable, 'Unavailable: the sandbox was stopped; retry');
    // It died since: the first caller to notice starts a new one, the others share that start.
    return entry.sandbox && entry.sandbox !== pending ? entry.sandbox : this.startFor(entry);
  }

  private startFor(entry: Entry): Promise<Sandbox> {
    entry.sandbox = this.start(entry);
    return entry.sandbox;
  }

  private start(entry: Entry): Promise<Sandbox> {
    const { backend, limits, log } = this.options;
    const started = Date.now();
    const starting = (async () => {
      await this.stopping.get(entry.tenant);
      await this.workspaces.prepare(entry.workspace);
      this.warnOnSharedUid(entry);
      return backend.start({ workspace: entry.workspace, limits, tenant: entry.tenant, uid: entry.uid });
    })();
    const watched = starting.then(
      (sandbox) => {
        const startMs = Date.now() - started;
        this.options.publish({ type: 'sandbox.started', tenant: entry.tenant, backend: backend.name, at: Date.now(), startMs });
        log.info({ tenant: entry.tenant, sandbox: backend.name, uid: entry.uid, startMs }, 'tenant sandbox started');
        void sandbox.exited.then((reason) => this.onExit(entry, watched, reason));
        return sandbox;
      },
      (err: unknown) => {
        if (entry.sandbox === watched) entry.sandbox = undefined;
        log.error({ tenant: entry.tenant, sandbox: backend.name, err }, 'tenant sandbox failed to start');
        // The reason (paths, stderr) stays in the log; the caller learns only that it is unavailable.
        throw new ProtocolError(ErrorCode.Unavailable, 'Unavailable: the sandbox could not be started; retry later');
      },
    );
    return watched;
  }

  /** An exit the pool did not ask for (OOM kill, crash): report it; the next call starts a new one. */
  private onExit(entry: Entry, which: Promise<Sandbox>, reason: string): void {
    if (entry.retired || entry.sandbox !== which) return;
    entry.sandbox = undefined;
    const short = reason.slice(0, MAX_REASON_CHARS);
    this.options.publish({ type: 'sandbox.stopped', tenant: entry.tenant, backend: this.options.backend.name, at: Date.now(), reason: `died: ${short}` });
    this.options.log.warn({ tenant: entry.tenant, reason: short }, 'tenant sandbox died; the next call starts a new one');
    if (entry.busy === 0) {
      clearTimeout(entry.idleTimer);
      this.forget(entry);
      this.afterStop(entry.tenant, () => this.unmount(entry));
    }
  }

  /** Stops an entry's sandbox on purpose and frees its slot at once. */
  private retire(entry: Entry, reason: 'idle' | 'evicted' | 'shutdown' | 'moved'): Promise<void> {
    if (entry.retired) return this.stopping.get(entry.tenant) ?? Promise.resolve();
    entry.retired = true;
    clearTimeout(entry.idleTimer);
    this.forget(entry);
    return this.afterStop(entry.tenant, async () => {
      const sandbox = entry.sandbox && (await entry.sandbox.catch(() => undefined));
      if (sandbox) {
        const wasAlive = sandbox.alive;
        await sandbox.stop();
        if (wasAlive) {
          // (a dead one's death was already reported)
          this.options.publish({ type: 'sandbox.stopped', tenant: entry.tenant, backend: this.options.backend.name, at: Date.now(), reason });
          this.options.log.info({ tenant: entry.tenant, reason }, 'tenant sandbox stopped');
        }
      }
      await this.unmount(entry);
    });
  }

  /** Runs `step` after the tenant's earlier stops, as a stop: the tenant's next start waits for it. */
  private afterStop(tenant: string, step: () => Promise<void>): Promise<void> {
    const previous = this.stopping.get(tenant);
    const done = (async () => {
      await previous;
      await step();
    })().finally(() => {
      if (this.stopping.get(tenant) === done) this.stopping.delete(tenant);
    });
    this.stopping.set(tenant, done);
    return done;
  }

  /** Unmounts a stopped sandbox's workspace image; a failure is logged, and the next start reuses the mount. */
  private async unmount(entry: Entry): Promise<void> {
    await this.workspaces.release(entry.workspace).catch((err: unknown) => {
      this.options.log.error({ tenant: entry.tenant, err }, 'could not unmount the workspace image');
    });
  }

  private forget(entry: Entry): void {
    if (this.entries.get(entry.tenant) === entry) this.entries.delete(entry.tenant);
  }

  private warnOnSharedUid(entry: Entry): void {
    if (entry.uid === undefined) return;
    for (const other of this.entries.values()) {
      if (other !== entry && other.uid === entry.uid) {
        this.options.log.warn(
          { tenant: entry.tenant, other: other.tenant, uid: entry.uid },
          'two live tenants share a sandbox uid: their process limits are counted together',
        );
      }
    }
  }
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
}
