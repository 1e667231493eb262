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
 * (`cleanupStaleSandboxes`). The only file that imports dockerode.
 */
import Docker from 'dockerode';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Duplex, PassThrough } from 'node:stream';
import { AgentChannel, AgentConnection } from './agent-connection';
import type { Sandbox, SandboxBackend, SandboxSpec } from './backend';
import { AGENT_NODE_FLAGS } from './none';

export const SANDBOX_LABEL = 'toolgate.sandbox';
export const TENANT_LABEL = 'toolgate.tenant';
export const EXECUTOR_LABEL = 'toolgate.executor';
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

  function createOptions(spec: SandboxSpec, uid: number, gid: number): Docker.ContainerCreateOptions {
    return {
      name: `toolgate-${slug(spec.tenant)}-${randomBytes(4).toString('hex')}`,
      Image: image,
      Entrypoint: ['node'],
      Cmd: [...AGENT_NODE_FLAGS, AGENT_IN_IMAGE, '--root', '/workspace', '--limits', JSON.stringify(spec.limits), '--run-as', `${uid}:${gid}`],
      // The agent's whole environment: nothing of this process's is passed on.
      Env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'LANG=C.UTF-8', 'HOME=/workspace'],
      WorkingDir: '/workspace',
      // Root with only CAP_SETUID/CAP_SETGID: the init stays root, the agent drops to uid:gid at once.
      User: '0:0',
      Hostname: 'sandbox',
      Labels: { [SANDBOX_LABEL]: '1', [TENANT_LABEL]: spec.tenant, [EXECUTOR_LABEL]: executorId },
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
        Binds: [`${hostPath(spec.workspace, options)}:/workspace:rw`],
        Init: true,
        LogConfig: { Type: 'none', Config: {} },
        ...(options.runtime ? { Runtime: options.runtime } : {}),
      },
    };
  }

  return {
    name: 'docker',
    isolating: true,
    async start(spec: SandboxSpec): Promise<Sandbox> {
      const uid = spec.uid ?? options.uid ?? 65534;
      const gid = spec.gid ?? uid;
      if (uid === 0 || gid === 0) throw new Error('the docker backend never runs a sandbox as root: give the workspace to another user');
      await prepareWorkspace(spec.workspace, uid, gid, options.chownWorkspace ?? false);
      const container = await docker.createContainer(createOptions(spec, uid, gid)).catch((err: unknown) => {
        throw new Error(describeCreateError(err, image));
      });
      let running: RunningContainer;
      try {
        running = await attachAndStart(container);
      } catch (err) {
        await container.remove({ force: true }).catch(() => undefined);
        throw new Error(`the sandbox container could not be started: ${dockerMessage(err)}`);
      }
      const removed = running.exited.then(() => container.remove({ force: true })).catch(() => undefined);
      const channel: AgentChannel = {
        stdout: running.stdout,
        stdin: running.stdin,
        stderr: running.stderr,
        exited: running.exited,
        kill: () => void container.kill({ signal: 'SIGKILL' }).catch(() => undefined),
      };
      let agent: AgentConnection;
      try {
        agent = await AgentConnection.open(channel, {
          startTimeoutMs: options.startTimeoutMs ?? 15_000,
          limits: spec.limits,
          hostRoot: spec.workspace,
          onStderr: options.onStderr,
        });
      } catch (err) {
        await removed;
        throw err;
      }
      return {
        call: (tool, args, signal, onProgress) => agent.call(tool, args, signal, onProgress),
        get alive() {
          return agent.alive;
        },
        exited: agent.exited,
        processEnded: (handle) => agent.processEnded(handle),
        async stop() {
          await agent.stop();
          await removed;
        },
      };
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
 * Resolves with how many it removed.
 */
export async function cleanupStaleSandboxes(executorId: string, options: { socketPath?: string } = {}): Promise<number> {
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
