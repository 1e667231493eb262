/**
 * `docker`: each sandbox is a container of the sandbox image (infra/sandbox/Dockerfile) whose
 * main process is the agent. The executor speaks to it over the container's attached stdio: one
 * hijacked connection to dockerd per sandbox (stdin in, multiplexed stdout/stderr out), so a call
 * costs a write and a read, never a `docker exec`. Hardening, each point on by default: no
 * network (network `none`; with egress on, the one way out is the sandbox's proxy channel mounted
 * at /run/toolgate: sandbox/egress-mount.ts), read-only root, every capability dropped but CAP_SETUID/CAP_SETGID (used once, below),
 * no-new-privileges, an unprivileged uid for the agent and everything it runs, no
 * IPC namespace (no /dev/shm), pids/memory/CPU limits, a size-limited tmpfs /tmp, the tenant's
 * workspace as the only writable mount, an init process (so orphans are reaped and the agent can
 * be killed from inside like anywhere else), no log driver (the JSON-RPC traffic is not logged
 * to disk). The container starts as root so that its init (docker-init, which holds the attached
 * stdio: the agent's channel) stays root; the agent drops to the sandbox uid itself before it
 * reads any input (`--run-as`, agent/run-as.ts), which leaves it non-dumpable, so commands of
 * that uid reach neither its descriptors nor the init's. An OCI runtime such as gVisor's runsc is passed through. Containers carry labels
 * naming this executor, so a restarted executor can remove what it left behind
 * (`cleanupStaleSandboxes`, stale.ts). With `poolSize` > 0 a few sandboxes are started ahead of need,
 * bound to no tenant, and a new tenant's first call takes one (warm-pool.ts, pool-mounts.ts).
 * The container itself: container.ts; attaching to it: running.ts; the module the executor
 * registers: module.ts.
 */
import type Docker from 'dockerode';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import type { ToolLimits } from '../../../shared/limits';
import { ownWorkspace } from '../../workspaces';
import { AgentChannel, AgentConnection } from '../agent-connection';
import type { Sandbox, SandboxBackend, SandboxSpec } from '../backend';
import { createEgressMount, EgressMount, releasedWith, SandboxEgress } from '../egress-mount';
import { dockerClient } from './client';
import { ContainerSettings, containerName, containerOptions, DockerHardening } from './container';
import { PoolMounts } from './pool-mounts';
import { attachAndStart, describeCreateError, dockerMessage, RunningContainer } from './running';
import { poolDirFor } from './stale';
import { PoolEntry, WarmPool } from './warm-pool';

export interface DockerBackendOptions {
  /** Default toolgate-sandbox:local (`npm run sandbox:image`). */
  image?: string;
  /** Memory limit, swap included, in MiB (default 256). */
  memoryMb?: number;
  /** Processes and threads per sandbox, the agent's included (default 128). */
  pidsLimit?: number;
  /** CPU cores (default 1). */
  cpus?: number;
  /** Size of the tmpfs /tmp in MiB (default 64). */
  tmpMb?: number;
  /** Uid and gid the sandbox runs as (default 65534; a spec's `uid` wins). */
  uid?: number;
  /** OCI runtime (e.g. runsc); unset: the daemon's default. */
  runtime?: string;
  /** Labels this executor's containers, for `cleanupStaleSandboxes` (default: the hostname). */
  executorId?: string;
  /**
   * The data directory as this process sees it and as the Docker host sees it: workspaces under
   * `dataDir` are bind-mounted from the same place under `hostDataDir` (an executor in a container).
   */
  dataDir?: string;
  hostDataDir?: string;
  /** Make the workspace owned by the sandbox uid before starting (executors do); otherwise only check. */
  chownWorkspace?: boolean;
  /** Hardening switches, each on unless set to false (for diagnosis, never for tenants). */
  hardening?: Partial<DockerHardening>;
  startTimeoutMs?: number;
  onStderr?: (line: string) => void;
  /** dockerd's socket; default: DOCKER_HOST, else /var/run/docker.sock. */
  socketPath?: string;
  /**
   * Sandboxes kept started ahead of need for new tenants (default 0: none). Needs `dataDir` (the
   * pool's slots live in `<dataDir>/sandbox-pool`) and the privilege to mount there.
   */
  poolSize?: number;
  /** What went wrong with the pool (a failed pre-start, a bind that did not take), for the log. */
  onPoolError?: (err: unknown) => void;
  /**
   * Governed egress: each sandbox's proxy channel, in a directory mounted at /run/toolgate, and
   * the agent's relay (a pre-started sandbox gets its directory at once, its tenant's channel at
   * bind). Unset: no network at all. Needs `dataDir`/`hostDataDir` to map the directory when the
   * executor itself runs in a container.
   */
  egress?: SandboxEgress;
}

/** A pre-started sandbox waiting for its tenant. */
interface Prestarted extends PoolEntry {
  container: Docker.Container;
  agent: AgentConnection;
  slot: string;
  egress: EgressMount | undefined;
  /** Resolves once the container is removed and its slot released. */
  removed: Promise<void>;
  limits: string;
}

const MIB = 1024 * 1024;

export function dockerBackend(options: DockerBackendOptions = {}): SandboxBackend {
  return new DockerBackend(options);
}

/** The backend: fresh containers per tenant, or pre-started ones from the warm pool bound to a tenant. */
class DockerBackend implements SandboxBackend {
  readonly name = 'docker';
  readonly isolating = true;
  private readonly docker: Docker;
  private readonly image: string;
  private readonly settings: ContainerSettings;
  private readonly poolSize: number;
  private readonly mounts: PoolMounts | undefined;
  private readonly poolUid: number;
  private pool: WarmPool<Prestarted> | undefined;
  private poolLimits: string | undefined;
  private poolOff = false;

  constructor(private readonly options: DockerBackendOptions) {
    this.docker = dockerClient(options.socketPath);
    this.image = options.image ?? 'toolgate-sandbox:local';
    const hardening: DockerHardening = {
      networkNone: true,
      readOnlyRoot: true,
      dropCapabilities: true,
      noNewPrivileges: true,
      noIpc: true,
      ...options.hardening,
    };
    this.settings = {
      image: this.image,
      executorId: options.executorId ?? os.hostname(),
      hardening,
      memoryBytes: (options.memoryMb ?? 256) * MIB,
      pidsLimit: options.pidsLimit ?? 128,
      cpus: options.cpus ?? 1,
      tmpMb: options.tmpMb ?? 64,
      runtime: options.runtime,
      dataDir: options.dataDir,
      hostDataDir: options.hostDataDir,
    };
    this.poolSize = options.poolSize ?? 0;
    if (this.poolSize > 0 && !options.dataDir) throw new Error('the docker backend needs dataDir for a warm pool (poolSize > 0)');
    this.mounts = this.poolSize > 0 ? new PoolMounts(poolDirFor(options.dataDir!)) : undefined;
    this.poolUid = options.uid ?? 65534;
  }

  async start(spec: SandboxSpec): Promise<Sandbox> {
    const { options } = this;
    const uid = spec.uid ?? options.uid ?? 65534;
    const gid = spec.gid ?? uid;
    if (uid === 0 || gid === 0) throw new Error('the docker backend never runs a sandbox as root: give the workspace to another user');
    await ownWorkspace(spec.workspace, uid, gid, options.chownWorkspace ?? false);
    const warm = uid === this.poolUid && gid === this.poolUid ? this.poolFor(spec.limits) : undefined;
    const entry = await warm?.take();
    if (entry) {
      try {
        return await this.bind(entry, spec);
      } catch (err) {
        options.onPoolError?.(err); // this tenant gets a fresh sandbox
      } finally {
        warm!.refill();
      }
    }
    warm?.refill(); // an empty pool (every entry taken or failed): start filling it again
    const egress = await this.egressMount();
    try {
      await egress?.attach(spec.tenant);
    } catch (err) {
      await egress?.release();
      throw err;
    }
    const { agent, removed } = await this.launch(
      containerOptions(this.settings, spec, uid, gid, undefined, egress?.hostDir),
      spec.limits,
      spec.workspace,
      egress?.release,
    ).catch(async (err: unknown) => {
      await egress?.release(); // idempotent: a container that was never created did not release it
      throw err;
    });
    // It reports its exit only once the container (and any slot) is gone.
    return releasedWith(agent, () => removed);
  }

  async warm(limits: ToolLimits): Promise<void> {
    await this.poolFor(limits)?.warm();
  }

  async close(): Promise<void> {
    this.poolOff = true;
    await this.pool?.close();
    await this.mounts?.close().catch((err: unknown) => this.options.onPoolError?.(err));
  }

  /** A new egress directory for a sandbox, when egress is on. */
  private egressMount(): Promise<EgressMount | undefined> {
    return this.options.egress ? createEgressMount(this.options.egress) : Promise.resolve(undefined);
  }

  /** Creates, attaches, starts; resolves once the agent answers. `removed` settles after the container is gone. */
  private async launch(create: Docker.ContainerCreateOptions, limits: ToolLimits, hostRoot: string | undefined, afterRemove?: () => Promise<void>) {
    const { options } = this;
    const container = await this.docker.createContainer(create).catch((err: unknown) => {
      throw new Error(describeCreateError(err, this.image));
    });
    let running: RunningContainer;
    try {
      running = await attachAndStart(this.docker, container, this.settings.memoryBytes);
    } catch (err) {
      await container.remove({ force: true }).catch(() => undefined);
      await afterRemove?.().catch(() => undefined);
      throw new Error(`the sandbox container could not be started: ${dockerMessage(err)}`);
    }
    const removed = running.exited
      .then(() => container.remove({ force: true }))
      .catch(() => undefined)
      .then(() => afterRemove?.())
      .catch((err: unknown) => options.onPoolError?.(err));
    const channel: AgentChannel = {
      stdout: running.stdout,
      stdin: running.stdin,
      stderr: running.stderr,
      exited: running.exited,
      kill: () => void container.kill({ signal: 'SIGKILL' }).catch(() => undefined),
    };
    try {
      const agent = await AgentConnection.open(channel, {
        startTimeoutMs: options.startTimeoutMs ?? 15_000,
        limits,
        hostRoot,
        onStderr: options.onStderr,
      });
      return { container, agent, removed };
    } catch (err) {
      await removed;
      throw err;
    }
  }

  private async prestart(limits: string): Promise<Prestarted> {
    const mounts = this.mounts!;
    // `toolgate_` is a prefix no tenant's container name has (theirs are `toolgate-<slug>-…`).
    const name = `toolgate_pool-${randomBytes(6).toString('hex')}`;
    await mounts.prepare().catch((err: unknown) => {
      // No privilege to mount here: every pre-start would fail the same way, so stop trying.
      this.turnPoolOff();
      throw new Error(`the docker warm pool is off: its directory cannot be made a shared mount (${err instanceof Error ? err.message : String(err)})`);
    });
    const slot = await mounts.slot(name);
    const egress = await this.egressMount().catch(async (err: unknown) => {
      await mounts.release(slot).catch(() => undefined);
      throw err;
    });
    const release = async () => {
      await egress?.release();
      await mounts.release(slot);
    };
    const parsed = JSON.parse(limits) as ToolLimits;
    const started = await this.launch(
      containerOptions(this.settings, { tenant: '', limits: parsed }, this.poolUid, this.poolUid, { name, slot }, egress?.hostDir),
      parsed,
      undefined,
      release,
    ).catch(async (err: unknown) => {
      await release().catch(() => undefined);
      throw err;
    });
    return {
      ...started,
      slot,
      egress,
      limits,
      get alive() {
        return started.agent.alive;
      },
      exited: started.agent.exited,
      async dispose() {
        await started.agent.stop();
        await started.removed;
      },
    };
  }

  /** The pool for these limits, started on first use; undefined when there is none or it was turned off. */
  private poolFor(limits: ToolLimits): WarmPool<Prestarted> | undefined {
    if (!this.mounts || this.poolOff) return undefined;
    const key = JSON.stringify(limits);
    this.poolLimits ??= key;
    if (key !== this.poolLimits) return undefined; // one executor has one set of limits; anything else starts fresh
    this.pool ??= new WarmPool(
      this.poolSize,
      () => this.prestart(key),
      (err) => this.options.onPoolError?.(err),
    );
    return this.pool;
  }

  private turnPoolOff(): void {
    this.poolOff = true;
    void this.pool?.close();
  }

  /**
   * Binds a pre-started sandbox to the tenant's workspace, and checks the agent sees exactly it.
   * A mount that fails or does not reach the container would fail every tenant the same way: that
   * turns the pool off. Anything else (this one sandbox died meanwhile) only discards the entry.
   */
  private async bind(entry: Prestarted, spec: SandboxSpec): Promise<Sandbox> {
    try {
      const mounted = this.mounts!.bind(spec.workspace, entry.slot).catch((err: unknown) => {
        this.turnPoolOff();
        throw err;
      });
      const [seen, host] = await Promise.all([
        mounted.then(() => entry.agent.bind(spec.workspace)),
        fs.stat(spec.workspace),
        entry.egress?.attach(spec.tenant),
        // Named for its tenant like any other (its labels were fixed before the tenant was known).
        entry.container.rename({ name: containerName(spec.tenant) }),
      ]);
      if (seen.dev !== host.dev || seen.ino !== host.ino) {
        this.turnPoolOff();
        throw new Error(
          `the workspace bound into a pre-started sandbox is not the one it sees (mount propagation does not reach the container: see docs/deployment.md); the warm pool is off`,
        );
      }
      return releasedWith(entry.agent, () => entry.removed);
    } catch (err) {
      await entry.dispose();
      throw err;
    }
  }
}
