/**
 * What a docker sandbox's container is: its create options (hardening, limits, the agent's
 * command line, the one writable mount), its labels and its name. Pure: nothing here talks to
 * dockerd.
 */
import type Docker from 'dockerode';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import type { SandboxSpec } from '../backend';
import { EGRESS_DIR_IN_SANDBOX, egressAgentArgs, egressBundleFile, SYSTEM_CA_BUNDLE } from '../egress-mount';
import { AGENT_NODE_FLAGS } from '../none';
import { currentOwner } from '../../process-owner';

export const SANDBOX_LABEL = 'toolgate.sandbox';
export const TENANT_LABEL = 'toolgate.tenant';
export const EXECUTOR_LABEL = 'toolgate.executor';
/** The process that made the container (process-owner.ts, as JSON): a start-up removes it only once that process is gone. */
export const OWNER_LABEL = 'toolgate.owner';
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

/** What every container of one backend shares, defaults applied (see DockerBackendOptions). */
export interface ContainerSettings {
  image: string;
  executorId: string;
  hardening: DockerHardening;
  memoryBytes: number;
  pidsLimit: number;
  cpus: number;
  tmpMb: number;
  runtime: string | undefined;
  dataDir: string | undefined;
  hostDataDir: string | undefined;
}

/**
 * The container for a sandbox. `pooled`: a pre-started one, whose /workspace is its empty slot
 * (propagation rslave, so the tenant's workspace bound there later appears inside) and whose
 * agent waits to be bound. `egressDir`: the sandbox's egress directory (sandbox/egress-mount.ts),
 * mounted read-only at /run/toolgate, and the agent's relay to it. Everything else is the same for both.
 */
export function containerOptions(
  settings: ContainerSettings,
  spec: Pick<SandboxSpec, 'tenant' | 'limits'> & { workspace?: string },
  uid: number,
  gid: number,
  pooled?: { name: string; slot: string },
  egressDir?: string,
): Docker.ContainerCreateOptions {
  const { hardening } = settings;
  const workspace = pooled ? `${hostPath(pooled.slot, settings)}:/workspace:rw,rslave` : `${hostPath(spec.workspace!, settings)}:/workspace:rw`;
  // With secrets, the executor's trust bundle (system roots plus its egress CA) also takes the
  // image's system bundle's place, for tools that read no variable.
  const bundle = egressDir ? egressBundleFile(egressDir) : undefined;
  const egress = egressDir
    ? [`${hostPath(egressDir, settings)}:${EGRESS_DIR_IN_SANDBOX}:ro`, ...(bundle ? [`${hostPath(bundle, settings)}:${SYSTEM_CA_BUNDLE}:ro`] : [])]
    : [];
  return {
    name: pooled?.name ?? containerName(spec.tenant),
    Image: settings.image,
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
      ...(egressDir ? egressAgentArgs() : []),
    ],
    // The agent's whole environment: nothing of this process's is passed on.
    Env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'LANG=C.UTF-8', 'HOME=/workspace'],
    WorkingDir: '/workspace',
    // Root with only CAP_SETUID/CAP_SETGID: the init stays root, the agent drops to uid:gid at once.
    User: '0:0',
    Hostname: 'sandbox',
    Labels: {
      [SANDBOX_LABEL]: '1',
      [TENANT_LABEL]: spec.tenant,
      [EXECUTOR_LABEL]: settings.executorId,
      [OWNER_LABEL]: JSON.stringify(currentOwner(settings.executorId)),
      ...(pooled ? { [POOL_LABEL]: '1' } : {}),
    },
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
      PidsLimit: settings.pidsLimit,
      Memory: settings.memoryBytes,
      MemorySwap: settings.memoryBytes,
      NanoCpus: Math.round(settings.cpus * 1e9),
      Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${settings.tmpMb}m,mode=1777` },
      Binds: [workspace, ...egress],
      Init: true,
      LogConfig: { Type: 'none', Config: {} },
      ...(settings.runtime ? { Runtime: settings.runtime } : {}),
    },
  };
}

/** The workspace as the Docker host sees it. */
function hostPath(workspace: string, settings: Pick<ContainerSettings, 'dataDir' | 'hostDataDir'>): string {
  const { dataDir, hostDataDir } = settings;
  if (!dataDir || !hostDataDir) return workspace;
  const rel = path.relative(dataDir, workspace);
  return rel.startsWith('..') || path.isAbsolute(rel) ? workspace : path.join(hostDataDir, rel);
}

/** `toolgate-<slug>-<random>`; pre-started ones are `toolgate_pool-…`, a prefix no tenant's has. */
export function containerName(tenant: string): string {
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
