/**
 * `bwrap`: the agent under bubblewrap, for Linux hosts without Docker. The sandbox sees a
 * minimal read-only system (/usr and the agent's code), a private /tmp, its workspace as the
 * only writable place, no network at all (a fresh network namespace: even the host's loopback is
 * out of reach), new pid/ipc/uts namespaces, no capabilities, an unprivileged uid, and a
 * process limit (RLIMIT_NPROC, which only binds a non-root uid: hence setpriv, not a user
 * namespace).
 */
import { existsSync, promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { SandboxBackend, SandboxSpec } from './backend';
import { AGENT_MAIN, AgentProcess } from './agent-process';
import { AGENT_NODE_FLAGS } from './none';

export interface BwrapBackendOptions {
  /** Uid/gid the sandbox runs as (default 65534, nobody; a spec's `uid` wins). The workspace must be writable by it. */
  uid?: number;
  gid?: number;
  /** RLIMIT_NPROC for the sandbox uid: processes and threads, the agent's own included (default 256). */
  maxProcesses?: number;
  /** Size of the private /tmp in bytes (default 64 MiB). */
  tmpBytes?: number;
  /** Make the workspace owned by the sandbox uid before starting (executors do; `stdio` only checks). */
  chownWorkspace?: boolean;
  startTimeoutMs?: number;
  onStderr?: (line: string) => void;
  bwrapPath?: string;
}

/** Code the agent needs, mounted read-only at the same paths: never the whole project (its data dir holds secrets). */
function agentCodeMounts(): string[] {
  const dist = path.resolve(AGENT_MAIN, '../../..');
  const root = path.dirname(dist);
  const mounts = [dist, path.join(root, 'node_modules'), path.join(root, 'package.json')];
  if (!process.execPath.startsWith('/usr/')) mounts.push(process.execPath);
  return mounts.filter((p) => existsSync(p));
}

function which(file: string): string | undefined {
  for (const dir of ['/usr/bin', '/bin', '/usr/local/bin', '/usr/sbin']) {
    const p = path.join(dir, file);
    if (existsSync(p)) return p;
  }
  return undefined;
}

export function bwrapBackend(options: BwrapBackendOptions = {}): SandboxBackend {
  const bwrap = options.bwrapPath ?? which('bwrap');
  const setpriv = which('setpriv');
  const prlimit = which('prlimit');

  async function prepare(workspace: string, uid: number, gid: number): Promise<void> {
    if (!bwrap) throw new Error('the bwrap backend needs bubblewrap (Debian package "bubblewrap"), which is not installed');
    if (!setpriv || !prlimit) throw new Error('the bwrap backend needs setpriv and prlimit (Debian package "util-linux")');
    if (process.getuid?.() !== 0 && process.getuid?.() !== uid) {
      throw new Error(`the bwrap backend must run as root (to drop to uid ${uid}) or as uid ${uid} itself`);
    }
    if (options.chownWorkspace) await fs.chown(workspace, uid, gid);
    const st = await fs.stat(workspace);
    const writable = st.uid === uid ? (st.mode & 0o200) !== 0 : (st.mode & 0o002) !== 0;
    if (!writable) {
      throw new Error(`the workspace ${workspace} is not writable by the sandbox user ${uid}: run \`chown -R ${uid}:${gid} ${workspace}\` or choose another root`);
    }
  }

  return {
    name: 'bwrap',
    isolating: true,
    async start(spec: SandboxSpec) {
      const uid = spec.uid ?? options.uid ?? 65534;
      const gid = spec.uid ?? options.gid ?? uid;
      await prepare(spec.workspace, uid, gid);
      const mounts = agentCodeMounts().flatMap((p) => ['--ro-bind', p, p]);
      const args = [
        '--reuid', String(uid), '--regid', String(gid), '--clear-groups',
        prlimit!, `--nproc=${options.maxProcesses ?? 256}`,
        bwrap!,
        '--unshare-all', '--die-with-parent', '--new-session', '--hostname', 'sandbox',
        '--ro-bind', '/usr', '/usr',
        '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/sbin', '/sbin',
        '--ro-bind', '/etc/passwd', '/etc/passwd', '--ro-bind-try', '/etc/group', '/etc/group', '--ro-bind-try', '/etc/ld.so.cache', '/etc/ld.so.cache',
        '--dev', '/dev', '--proc', '/proc',
        '--size', String(options.tmpBytes ?? 64 * 1024 * 1024), '--tmpfs', '/tmp',
        ...mounts,
        '--bind', spec.workspace, '/workspace', '--chdir', '/workspace',
        // bwrap builds the view on a tmpfs root; once the mounts are in place, freeze it.
        '--remount-ro', '/',
        '--cap-drop', 'ALL',
        '--', process.execPath, ...AGENT_NODE_FLAGS, AGENT_MAIN, '--root', '/workspace', '--limits', JSON.stringify(spec.limits),
      ];
      return AgentProcess.start(
        { file: setpriv!, args, env: { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: '/workspace' } },
        spec,
        { startTimeoutMs: options.startTimeoutMs ?? 10_000, onStderr: options.onStderr },
      );
    },
  };
}
