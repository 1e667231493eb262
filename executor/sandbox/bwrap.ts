/**
 * `bwrap`: the agent under bubblewrap, for Linux hosts without Docker. The sandbox sees a
 * minimal read-only system (/usr and the agent's code), a private /tmp, its workspace as the
 * only writable place, no network of its own (a fresh network namespace: even the host's loopback
 * is out of reach; with egress on, the one way out is its proxy channel, mounted at /run/toolgate
 * and relayed by the agent: sandbox/egress-mount.ts), new pid/ipc/uts namespaces and no capabilities.
 *
 * Two ways to run, chosen by who runs toolgate:
 * - as root (executors, `serve`, root running `stdio`): bwrap runs privileged, without a user
 *   namespace, so the sandbox's ids are the host's. The agent starts as root holding only
 *   CAP_SETUID/CAP_SETGID and drops to the workspace owner's uid (`--run-as`, see
 *   agent/run-as.ts): files keep that uid, and the drop leaves the agent non-dumpable, so its
 *   commands (same uid) cannot open its descriptors or memory; bwrap's pid 1, which also holds
 *   the channel, stays root. RLIMIT_NPROC (prlimit, inherited) binds the uid once it is not root.
 * - as an ordinary user: bwrap builds a user namespace mapping only that user, so the sandbox
 *   runs as the user and files stay theirs. Nothing can be dropped to, so the agent stays
 *   dumpable (its own commands could reach its channel; the executor reads that channel
 *   defensively either way), and there is no process limit (RLIMIT_NPROC would count every
 *   process the user has). Documented in the README.
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { tenantUid } from '../tenant-names';
import { ownWorkspace } from '../workspaces';
import type { Sandbox, SandboxBackend, SandboxSpec } from './backend';
import { AGENT_MAIN, AgentProcess } from './agent-process';
import {
  createEgressMount,
  EGRESS_DIR_IN_SANDBOX,
  egressAgentArgs,
  egressBundleFile,
  EgressMount,
  releasedWith,
  SandboxEgress,
  SYSTEM_CA_BUNDLE,
} from './egress-mount';
import type { SandboxBackendModule } from './module';
import { AGENT_NODE_FLAGS } from './none';

export interface BwrapBackendOptions {
  /** Uid/gid the sandbox runs as when running as root (default 65534, nobody; a spec's `uid` wins). The workspace must be writable by it. */
  uid?: number;
  gid?: number;
  /** RLIMIT_NPROC for the sandbox uid: processes and threads, the agent's own included (default 256). Root only. */
  maxProcesses?: number;
  /** Size of the private /tmp in bytes (default 64 MiB). */
  tmpBytes?: number;
  /** Make the workspace owned by the sandbox uid before starting (executors do; `stdio` only checks). */
  chownWorkspace?: boolean;
  startTimeoutMs?: number;
  onStderr?: (line: string) => void;
  bwrapPath?: string;
  /** Governed egress: each sandbox's proxy channel, mounted at /run/toolgate, and the agent's relay. Unset: no network at all. */
  egress?: SandboxEgress;
}

/**
 * Where the agent's code appears inside the sandbox, whatever the host's install path: a path
 * under /tmp would sit beneath the sandbox's own /tmp, and a 0700 home or any parent the sandbox
 * uid cannot enter would hide the code from the agent once it drops to that uid.
 */
export const AGENT_HOME = '/opt/toolgate';

/**
 * The packages the agent may load at run time (each lazily, on the first call that needs it),
 * and undici, which commands' Node programs load for fetch (agent/fetch-proxy.ts). Anything the
 * agent requires must be named here, or it is missing inside the sandbox.
 */
export const AGENT_RUNTIME_PACKAGES = ['diff', 'node-pty', 'picomatch', 'undici', 'zod'] as const;

/** The host's node when it lives in /usr (mounted as a whole), else the binary mounted under AGENT_HOME. */
const AGENT_NODE = process.execPath.startsWith('/usr/') ? process.execPath : `${AGENT_HOME}/bin/node`;
const AGENT_DIST = path.resolve(AGENT_MAIN, '../../..');
const AGENT_MAIN_INSIDE = `${AGENT_HOME}/dist/${path.relative(AGENT_DIST, AGENT_MAIN)}`;

/** A package's folder as Node would find it from `from`: its own node_modules, then each parent's. */
function packageDir(name: string, from: string): string | undefined {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (dir === path.dirname(dir)) return undefined;
  }
}

/** Host path → sandbox path of the code the agent needs: never the whole project (its data dir holds secrets). */
function agentCodeMounts(): Array<[string, string]> {
  const root = path.dirname(AGENT_DIST);
  const mounts: Array<[string, string]> = [[AGENT_DIST, `${AGENT_HOME}/dist`]];
  if (existsSync(path.join(root, 'package.json'))) mounts.push([path.join(root, 'package.json'), `${AGENT_HOME}/package.json`]);
  for (const name of AGENT_RUNTIME_PACKAGES) {
    const dir = packageDir(name, root);
    if (dir) mounts.push([dir, `${AGENT_HOME}/node_modules/${name}`]);
  }
  if (!process.execPath.startsWith('/usr/')) mounts.push([process.execPath, AGENT_NODE]);
  return mounts;
}

function which(file: string): string | undefined {
  for (const dir of ['/usr/bin', '/bin', '/usr/local/bin', '/usr/sbin']) {
    const p = path.join(dir, file);
    if (existsSync(p)) return p;
  }
  return undefined;
}

/**
 * `--dir` (mode 0755) for every directory above the given mount targets, parents first. bwrap
 * creates missing parents of a file mount 0700, which as root means owned by root and closed to
 * the sandbox uid (it could not reach /etc or the agent's code).
 */
function openParents(targets: readonly string[]): string[] {
  const dirs = new Set<string>();
  for (const target of targets) {
    for (let dir = path.dirname(target); dir !== '/' && dir !== '.'; dir = path.dirname(dir)) dirs.add(dir);
  }
  return [...dirs].sort((a, b) => a.split('/').length - b.split('/').length).flatMap((d) => ['--perms', '0755', '--dir', d]);
}

/** The read-only system view, /tmp, the workspace and the egress directory: the same for both ways of running. */
function view(spec: SandboxSpec, tmpBytes: number, egressDir: string | undefined): string[] {
  const code = agentCodeMounts();
  const egress = egressDir ? ['--ro-bind', egressDir, EGRESS_DIR_IN_SANDBOX] : [];
  // The system's certificate authorities (public: what curl, git and pip verify HTTPS through
  // egress with); with secrets, the executor's bundle (the same roots plus its egress CA) in
  // the system bundle's place, for tools that read no variable.
  const bundle = egressDir ? egressBundleFile(egressDir) : undefined;
  const trust = ['--ro-bind-try', '/etc/ssl', '/etc/ssl', ...(bundle ? ['--ro-bind', bundle, SYSTEM_CA_BUNDLE] : [])];
  return [
    ...openParents(['/etc/passwd', ...code.map(([, inside]) => inside), ...(egressDir ? [`${EGRESS_DIR_IN_SANDBOX}/.`] : [])]),
    '--die-with-parent',
    '--new-session',
    '--hostname',
    'sandbox',
    '--ro-bind',
    '/usr',
    '/usr',
    '--symlink',
    'usr/lib',
    '/lib',
    '--symlink',
    'usr/lib64',
    '/lib64',
    '--symlink',
    'usr/bin',
    '/bin',
    '--symlink',
    'usr/sbin',
    '/sbin',
    '--ro-bind',
    '/etc/passwd',
    '/etc/passwd',
    '--ro-bind-try',
    '/etc/group',
    '/etc/group',
    '--ro-bind-try',
    '/etc/ld.so.cache',
    '/etc/ld.so.cache',
    ...trust,
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--perms',
    '1777',
    '--size',
    String(tmpBytes),
    '--tmpfs',
    '/tmp',
    ...code.flatMap(([host, inside]) => ['--ro-bind', host, inside]),
    // No --chdir: as root, bwrap changes directory with its capabilities already dropped, and a
    // 0700 workspace of another uid is closed to it; the agent enters it after dropping to that uid.
    '--bind',
    spec.workspace,
    '/workspace',
    ...egress,
    // bwrap builds the view on a tmpfs root; once the mounts are in place, freeze it.
    '--remount-ro',
    '/',
  ];
}

export function bwrapBackend(options: BwrapBackendOptions = {}): SandboxBackend {
  const bwrap = options.bwrapPath ?? which('bwrap');
  const prlimit = which('prlimit');
  const relay = options.egress ? egressAgentArgs() : [];
  const agent = (spec: SandboxSpec) => [
    AGENT_NODE,
    ...AGENT_NODE_FLAGS,
    AGENT_MAIN_INSIDE,
    '--root',
    '/workspace',
    '--limits',
    JSON.stringify(spec.limits),
    ...relay,
  ];
  const env = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: '/workspace' };
  const tmpBytes = options.tmpBytes ?? 64 * 1024 * 1024;

  async function prepare(workspace: string, uid: number, gid: number): Promise<void> {
    if (!bwrap) throw new Error('the bwrap backend needs bubblewrap (Debian package "bubblewrap"), which is not installed');
    await ownWorkspace(workspace, uid, gid, options.chownWorkspace ?? false);
  }

  /** As root: privileged bwrap, no user namespace; the agent drops to the owner's uid itself. */
  async function startAsRoot(spec: SandboxSpec, egressDir: string | undefined) {
    if (!prlimit) throw new Error('the bwrap backend needs prlimit (Debian package "util-linux")');
    const uid = spec.uid ?? options.uid ?? 65534;
    const gid = spec.gid ?? (spec.uid !== undefined ? spec.uid : (options.gid ?? uid));
    if (uid === 0 || gid === 0) throw new Error('the bwrap backend never runs a sandbox as root: give the workspace to another user');
    await prepare(spec.workspace, uid, gid);
    const args = [
      `--nproc=${options.maxProcesses ?? 256}`,
      bwrap!,
      // Every namespace but the user one (--unshare-all would add it): the agent must reach host uids.
      '--unshare-ipc',
      '--unshare-pid',
      '--unshare-net',
      '--unshare-uts',
      '--unshare-cgroup-try',
      ...view(spec, tmpBytes, egressDir),
      '--cap-drop',
      'ALL',
      '--cap-add',
      'CAP_SETUID',
      '--cap-add',
      'CAP_SETGID',
      '--',
      ...agent(spec),
      '--run-as',
      `${uid}:${gid}`,
    ];
    return AgentProcess.start({ file: prlimit, args, env }, spec, {
      startTimeoutMs: options.startTimeoutMs ?? 10_000,
      onStderr: options.onStderr,
    });
  }

  /** As an ordinary user: a user namespace mapping only this user; the sandbox is that user. */
  async function startAsUser(spec: SandboxSpec, egressDir: string | undefined) {
    const uid = process.getuid!();
    const gid = process.getgid!();
    const asked = spec.uid ?? options.uid;
    if (asked !== undefined && asked !== uid) {
      throw new Error(`the bwrap backend can run a sandbox as uid ${asked} only when toolgate runs as root (it runs as ${uid})`);
    }
    await prepare(spec.workspace, uid, gid);
    const args = ['--unshare-all', ...view(spec, tmpBytes, egressDir), '--cap-drop', 'ALL', '--', ...agent(spec)];
    return AgentProcess.start({ file: bwrap!, args, env }, spec, {
      startTimeoutMs: options.startTimeoutMs ?? 10_000,
      onStderr: options.onStderr,
    });
  }

  const startIn = (spec: SandboxSpec, egressDir?: string): Promise<Sandbox> =>
    process.getuid?.() === 0 ? startAsRoot(spec, egressDir) : startAsUser(spec, egressDir);

  /** With egress: the sandbox's channel opens first and closes once the sandbox has exited. */
  async function startWithEgress(spec: SandboxSpec, egress: SandboxEgress): Promise<Sandbox> {
    let mount: EgressMount | undefined;
    try {
      mount = await createEgressMount(egress);
      await mount.attach(spec.tenant);
      return releasedWith(await startIn(spec, mount.hostDir), mount.release);
    } catch (err) {
      await mount?.release();
      throw err;
    }
  }

  return {
    name: 'bwrap',
    isolating: true,
    start: (spec: SandboxSpec) => (options.egress ? startWithEgress(spec, options.egress) : startIn(spec)),
  };
}

/** bwrap has no section of its own: its defaults serve every executor. */
export const bwrapModule = {
  id: 'bwrap',
  section: () => ({}),
  create: (_section, deps) => bwrapBackend({ chownWorkspace: deps.role === 'executor', onStderr: deps.onStderr, egress: deps.egress }),
  // One uid per tenant, so one tenant's processes cannot use up another's RLIMIT_NPROC.
  uidFor: tenantUid,
} satisfies SandboxBackendModule<object>;
