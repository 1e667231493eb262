/**
 * `docker`: each sandbox is a container of the sandbox image (infra/sandbox/Dockerfile) whose
 * main process is the agent. The executor speaks to it over the container's attached stdio: one
 * hijacked connection to dockerd per sandbox (stdin in, multiplexed stdout/stderr out), so a call
 * costs a write and a read, never a `docker exec`. Hardening, each point on by default: no
 * network, read-only root, every capability dropped but CAP_SETUID/CAP_SETGID (used once, below),
 * no-new-privileges, an unprivileged uid for the agent and everything it runs, no
 * IPC namespace (no /dev/shm), pids/memory/CPU limits, a size-limited tmpfs /tmp, the tenant's
 * workspace as the only writable mount, an init process (so orphans are reaped and the agent can
 * be killed from inside like anywhere else), no log driver (the JSON-RPC traffic is not logged
 * to disk). The container starts as root so that its init (docker-init, which holds the attached
 * stdio: the agent's channel) stays root; the agent drops to the sandbox uid itself before it
 * reads any input (`--run-as`, agent/run-as.ts), which leaves it non-dumpable, so commands of
 * that uid reach neither its descriptors nor the init's. An OCI runtime such as gVisor's runsc is passed through. Containers carry labels
 * naming this executor, so a restarted executor can remove what it left behind
 * (`cleanupStaleSandboxes`). With `poolSize` > 0 a few sandboxes are started ahead of need,
 * bound to no tenant, and a new tenant's first call takes one (docker-pool.ts, pool-mounts.ts).
 * The only file that imports dockerode.
 */
import Docker from 'dockerode';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Duplex, PassThrough } from 'node:stream';
import type { ToolLimits } from '../../shared/limits';
import { AgentChannel, AgentConnection } from './agent-connection';
import type { Sandbox, SandboxBackend, SandboxSpec } from './backend';
import { PoolEntry, WarmPool } from './docker-pool';
import { AGENT_NODE_FLAGS } from './none';
import { PoolMounts } from './pool-mounts';

export const SANDBOX_LABEL = 'toolgate.sandbox';
export const TENANT_LABEL = 'toolgate.tenant';
export const EXECUTOR_LABEL = 'toolgate.executor';
/** On a pre-started sandbox (its tenant label stays empty: labels are fixed at create; its name changes at bind). */
export const POOL_LABEL = 'toolgate.pool';
/** Where the image keeps the compiled agent (infra/sandbox/Dockerfile). */
const AGENT_IN_IMAGE = '/app/dist/executor/agent/main.js';

export interface DockerHardening {
  /** NetworkMode none: only a loopback interface of its own. */
  networkNone: boolean;
  readOnlyRoot: boolean;
  /** CapDrop ALL. */
  dropCapabilities: boolean;
  noNewPrivileges: boolean;
  /** IpcMode none: no /dev/shm, so /workspace and /tmp stay the only writable places. */
  noIpc: boolean;
}

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
}

/** Where the warm pool's slots live, under a data directory. */
export function poolDirFor(dataDir: string): string {
  return path.join(dataDir, 'sandbox-pool');
}

/** A pre-started sandbox waiting for its tenant. */
interface Prestarted extends PoolEntry {
  container: Docker.Container;
  agent: AgentConnection;
  slot: string;
  /** Resolves once the container is removed and its slot released. */
  removed: Promise<void>;
  limits: string;
}

const MIB = 1024 * 1024;

function client(socketPath?: string): Docker {
  return socketPath ? new Docker({ socketPath }) : new Docker();
}

export function dockerBackend(options: DockerBackendOptions = {}): SandboxBackend {
  const docker = client(options.socketPath);
  const image = options.image ?? 'toolgate-sandbox:local';
  const executorId = options.executorId ?? os.hostname();
  const hardening: DockerHardening = {
    networkNone: true,
    readOnlyRoot: true,
    dropCapabilities: true,
    noNewPrivileges: true,
    noIpc: true,
    ...options.hardening,
  };
  const memory = (options.memoryMb ?? 256) * MIB;

  const poolSize = options.poolSize ?? 0;
  if (poolSize > 0 && !options.dataDir) throw new Error('the docker backend needs dataDir for a warm pool (poolSize > 0)');
  const mounts = poolSize > 0 ? new PoolMounts(poolDirFor(options.dataDir!)) : undefined;
  const poolUid = options.uid ?? 65534;
  let pool: WarmPool<Prestarted> | undefined;
  let poolLimits: string | undefined;
  let poolOff = false;

  /**
   * The container for a sandbox. `pooled`: a pre-started one, whose /workspace is its empty slot
   * (propagation rslave, so the tenant's workspace bound there later appears inside) and whose
   * agent waits to be bound. Everything else is the same for both.
   */
  function createOptions(
    spec: Pick<SandboxSpec, 'tenant' | 'limits'>,
    uid: number,
    gid: number,
    pooled?: { name: string; slot: string },
  ): Docker.ContainerCreateOptions {
    const workspace = pooled ? `${hostPath(pooled.slot, options)}:/workspace:rw,rslave` : `${hostPath((spec as SandboxSpec).workspace, options)}:/workspace:rw`;
    return {
      name: pooled?.name ?? containerName(spec.tenant),
      Image: image,
      Entrypoint: ['node'],
      Cmd: [
        ...AGENT_NODE_FLAGS,
        AGENT_IN_IMAGE,
        '--root',
        '/workspace',
        '--limits',
        JSON.stringify(spec.limits),
        '--run-as',
        `${uid}:${gid}`,
        ...(pooled ? ['--await-bind'] : []),
      ],
      // The agent's whole environment: nothing of this process's is passed on.
      Env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'LANG=C.UTF-8', 'HOME=/workspace'],
      WorkingDir: '/workspace',
      // Root with only CAP_SETUID/CAP_SETGID: the init stays root, the agent drops to uid:gid at once.
      User: '0:0',
      Hostname: 'sandbox',
      Labels: { [SANDBOX_LABEL]: '1', [TENANT_LABEL]: spec.tenant, [EXECUTOR_LABEL]: executorId, ...(pooled ? { [POOL_LABEL]: '1' } : {}) },
      // stdin stays open while we are attached and closes when we end it: the agent's cue to exit.
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      OpenStdin: true,
      StdinOnce: true,
      Tty: false,
      HostConfig: {
        NetworkMode: hardening.networkNone ? 'none' : undefined,
        ReadonlyRootfs: hardening.readOnlyRoot,
        CapDrop: hardening.dropCapabilities ? ['ALL'] : undefined,
        CapAdd: hardening.dropCapabilities ? ['SETUID', 'SETGID'] : undefined,
        SecurityOpt: hardening.noNewPrivileges ? ['no-new-privileges'] : undefined,
        IpcMode: hardening.noIpc ? 'none' : undefined,
        PidsLimit: options.pidsLimit ?? 128,
        Memory: memory,
        MemorySwap: memory,
        NanoCpus: Math.round((options.cpus ?? 1) * 1e9),
        Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${options.tmpMb ?? 64}m,mode=1777` },
        Binds: [workspace],
        Init: true,
        LogConfig: { Type: 'none', Config: {} },
        ...(options.runtime ? { Runtime: options.runtime } : {}),
      },
    };
  }

  /** Creates, attaches, starts; resolves once the agent answers. `removed` settles after the container is gone. */
  async function launch(create: Docker.ContainerCreateOptions, limits: ToolLimits, hostRoot: string | undefined, afterRemove?: () => Promise<void>) {
    const container = await docker.createContainer(create).catch((err: unknown) => {
      throw new Error(describeCreateError(err, image));
    });
    let running: RunningContainer;
    try {
      running = await attachAndStart(container);
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

  /** The Sandbox a started agent serves; it reports its exit only once the container (and any slot) is gone. */
  function sandboxOf(agent: AgentConnection, removed: Promise<void>): Sandbox {
    const exited = agent.exited.then(async (reason) => {
      await removed;
      return reason;
    });
    return {
      call: (tool, args, signal, onProgress) => agent.call(tool, args, signal, onProgress),
      get alive() {
        return agent.alive;
      },
      exited,
      processEnded: (handle) => agent.processEnded(handle),
      async stop() {
        await agent.stop();
        await removed;
      },
    };
  }

  async function prestart(limits: string): Promise<Prestarted> {
    // `toolgate_` is a prefix no tenant's container name has (theirs are `toolgate-<slug>-…`).
    const name = `toolgate_pool-${randomBytes(6).toString('hex')}`;
    await mounts!.prepare().catch((err: unknown) => {
      // No privilege to mount here: every pre-start would fail the same way, so stop trying.
      turnPoolOff();
      throw new Error(`the docker warm pool is off: its directory cannot be made a shared mount (${err instanceof Error ? err.message : String(err)})`);
    });
    const slot = await mounts!.slot(name);
    const started = await launch(
      createOptions({ tenant: '', limits: JSON.parse(limits) as ToolLimits }, poolUid, poolUid, { name, slot }),
      JSON.parse(limits) as ToolLimits,
      undefined,
      () => mounts!.release(slot),
    ).catch(async (err: unknown) => {
      await mounts!.release(slot).catch(() => undefined);
      throw err;
    });
    return {
      ...started,
      slot,
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
  function poolFor(limits: ToolLimits): WarmPool<Prestarted> | undefined {
    if (!mounts || poolOff) return undefined;
    const key = JSON.stringify(limits);
    poolLimits ??= key;
    if (key !== poolLimits) return undefined; // one executor has one set of limits; anything else starts fresh
    pool ??= new WarmPool(
      poolSize,
      () => prestart(key),
      (err) => options.onPoolError?.(err),
    );
    return pool;
  }

  function turnPoolOff(): void {
    poolOff = true;
    void pool?.close();
  }

  /**
   * Binds a pre-started sandbox to the tenant's workspace, and checks the agent sees exactly it.
   * A mount that fails or does not reach the container would fail every tenant the same way: that
   * turns the pool off. Anything else (this one sandbox died meanwhile) only discards the entry.
   */
  async function bind(entry: Prestarted, spec: SandboxSpec): Promise<Sandbox> {
    try {
      const mounted = mounts!.bind(spec.workspace, entry.slot).catch((err: unknown) => {
        turnPoolOff();
        throw err;
      });
      const [seen, host] = await Promise.all([
        mounted.then(() => entry.agent.bind(spec.workspace)),
        fs.stat(spec.workspace),
        // Named for its tenant like any other (its labels were fixed before the tenant was known).
        entry.container.rename({ name: containerName(spec.tenant) }),
      ]);
      if (seen.dev !== host.dev || seen.ino !== host.ino) {
        turnPoolOff();
        throw new Error(
          `the workspace bound into a pre-started sandbox is not the one it sees (mount propagation does not reach the container: see docs/deployment.md); the warm pool is off`,
        );
      }
      return sandboxOf(entry.agent, entry.removed);
    } catch (err) {
      await entry.dispose();
      throw err;
    }
  }

  return {
    name: 'docker',
    isolating: true,
    async start(spec: SandboxSpec): Promise<Sandbox> {
      const uid = spec.uid ?? options.uid ?? 65534;
      const gid = spec.gid ?? uid;
      if (uid === 0 || gid === 0) throw new Error('the docker backend never runs a sandbox as root: give the workspace to another user');
      await prepareWorkspace(spec.workspace, uid, gid, options.chownWorkspace ?? false);
      const warm = uid === poolUid && gid === poolUid ? poolFor(spec.limits) : undefined;
      const entry = await warm?.take();
      if (entry) {
        try {
          return await bind(entry, spec);
        } catch (err) {
          options.onPoolError?.(err); // this tenant gets a fresh sandbox
        } finally {
          warm!.refill();
        }
      }
      warm?.refill(); // an empty pool (every entry taken or failed): start filling it again
      const { agent, removed } = await launch(createOptions(spec, uid, gid), spec.limits, spec.workspace);
      return sandboxOf(agent, removed);
    },
    async warm(limits: ToolLimits): Promise<void> {
      await poolFor(limits)?.warm();
    },
    async close(): Promise<void> {
      poolOff = true;
      await pool?.close();
      await mounts?.close().catch((err: unknown) => options.onPoolError?.(err));
    },
  };

  interface RunningContainer {
    stdin: Duplex;
    stdout: PassThrough;
    stderr: PassThrough;
    /** Resolves once the container has stopped, with a sentence saying how. */
    exited: Promise<string>;
  }

  /** Attaches before starting, so no byte of output (or an early death) is missed. */
  async function attachAndStart(container: Docker.Container): Promise<RunningContainer> {
    const stream = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as Duplex;
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    docker.modem.demuxStream(stream, stdout, stderr);
    let open = true;
    const ended = () => {
      if (!open) return;
      open = false;
      stdout.end();
      stderr.end();
    };
    stream.once('end', ended);
    stream.once('close', ended);
    stream.on('error', () => undefined); // a broken connection shows as the container's exit
    try {
      await container.start();
    } catch (err) {
      stream.destroy();
      throw err;
    }
    const exited = container
      .wait({ condition: 'not-running' })
      .then(
        async (result: { StatusCode?: number }) => exitSentence(await container.inspect().catch(() => undefined), result.StatusCode),
        (err: unknown) => {
          container.kill({ signal: 'SIGKILL' }).catch(() => undefined);
          return `was lost: the docker daemon stopped answering (${dockerMessage(err)})`;
        },
      )
      .finally(() => stream.destroy());
    return { stdin: stream, stdout, stderr, exited };
  }

  function exitSentence(info: Docker.ContainerInspectInfo | undefined, status: number | undefined): string {
    if (info?.State.OOMKilled) return `was killed by the out-of-memory killer (the sandbox's memory limit is ${memory / MIB} MiB)`;
    const code = info?.State.ExitCode ?? status;
    if (code !== undefined && code > 128 && code < 160) return `was killed by signal ${code - 128}`;
    return `exited with code ${code ?? 'unknown'}`;
  }
}

/**
 * Removes the sandbox containers a previous run of this executor left behind (it crashed, or
 * was killed before it could stop them): every container labelled with its executor id. Call it
 * once at executor start-up, before the first sandbox starts: in `startExecutor`, right after
 * `createBackend` when `config.sandbox === 'docker'`, with `config.docker.executorId`. Executor
 * ids must be unique per Docker host, or one executor would remove another's sandboxes.
 * With `dataDir`, the warm pool's slots under it are unmounted and removed too (before workspace
 * images are checked: a slot may still hold one mounted). Resolves with how many containers it removed.
 */
export async function cleanupStaleSandboxes(executorId: string, options: { socketPath?: string; dataDir?: string } = {}): Promise<number> {
  const docker = client(options.socketPath);
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

/** The workspace as the Docker host sees it. */
function hostPath(workspace: string, options: DockerBackendOptions): string {
  const { dataDir, hostDataDir } = options;
  if (!dataDir || !hostDataDir) return workspace;
  const rel = path.relative(dataDir, workspace);
  return rel.startsWith('..') || path.isAbsolute(rel) ? workspace : path.join(hostDataDir, rel);
}

/**
 * The workspace must exist (a bind mount would otherwise create it, owned by root) and be
 * writable by the sandbox uid.
 */
async function prepareWorkspace(workspace: string, uid: number, gid: number, chown: boolean): Promise<void> {
  const st = await fs.stat(workspace).catch((err: NodeJS.ErrnoException) => {
    throw new Error(err.code === 'ENOENT' ? `the workspace ${workspace} does not exist` : `the workspace ${workspace} cannot be used: ${err.message}`);
  });
  if (!st.isDirectory()) throw new Error(`the workspace ${workspace} is not a directory`);
  if (chown && st.uid !== uid) {
    await fs.chown(workspace, uid, gid);
    return;
  }
  const writable = st.uid === uid ? (st.mode & 0o200) !== 0 : st.gid === gid ? (st.mode & 0o020) !== 0 : (st.mode & 0o002) !== 0;
  if (!writable) {
    throw new Error(
      `the workspace ${workspace} is not writable by the sandbox user ${uid}: run \`chown -R ${uid}:${gid} ${workspace}\` or choose another root`,
    );
  }
}

function containerName(tenant: string): string {
  return `toolgate-${slug(tenant)}-${randomBytes(4).toString('hex')}`;
}

function slug(text: string): string {
  return (
    text
      .toLowerCase()
      .replace(/[^a-z0-9_.-]+/g, '-')
      .replace(/^[^a-z0-9]+/, '')
      .slice(0, 40) || 'tenant'
  );
}

function dockerMessage(err: unknown): string {
  const e = err as { json?: { message?: string }; message?: string } | undefined;
  return (e?.json?.message ?? e?.message ?? String(err)).trim();
}

function describeCreateError(err: unknown, image: string): string {
  const e = err as { statusCode?: number; code?: string } | undefined;
  if (e?.code === 'ENOENT' || e?.code === 'ECONNREFUSED' || e?.code === 'EACCES') {
    return `the docker sandbox backend cannot reach the Docker daemon (${e.code}): is dockerd running, and may this user use its socket?`;
  }
  if (e?.statusCode === 404 && /image/i.test(dockerMessage(err))) {
    return `the sandbox image ${image} is not on this Docker host: build it with \`npm run sandbox:image\``;
  }
  return `the sandbox container could not be created: ${dockerMessage(err)}`;
}
