/**
 * Sandboxes as the executor uses them: a backend from the built product, started on a workspace,
 * called through the Sandbox interface (JSON-RPC to the agent inside).
 */
import { promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type * as Bwrap from '../../executor/sandbox/bwrap';
import type * as DockerBackend from '../../executor/sandbox/docker/backend';
import type * as None from '../../executor/sandbox/none';
import type { Sandbox, SandboxBackend } from '../../executor/sandbox/backend';
import type * as Limits from '../../shared/limits';
import type { ToolResult } from '../../shared/tools/tool';
import { childrenMap, processTree } from './rss';
import { productModule } from './product';
import { containerPid, SANDBOX_IMAGE } from './docker';

/** Labels the bench's docker sandboxes (the backend's executor label), so they can be found. */
export const BENCH_EXECUTOR_ID = 'toolgate-bench';

export type BackendName = 'none' | 'bwrap' | 'docker';

/** `pool`: for docker, a warm pool of that many pre-started sandboxes, its slots under `dataDir`. */
export function createBackend(name: BackendName, pool?: { size: number; dataDir: string }): SandboxBackend {
  const onStderr = () => undefined;
  // Each backend's own module, loaded only when asked for (dockerode's load is not the bench's to pay).
  if (name === 'none') return productModule<typeof None>('executor/sandbox/none').noneBackend({ onStderr });
  if (name === 'bwrap') return productModule<typeof Bwrap>('executor/sandbox/bwrap').bwrapBackend({ onStderr });
  return productModule<typeof DockerBackend>('executor/sandbox/docker/backend').dockerBackend({
    onStderr,
    image: SANDBOX_IMAGE,
    executorId: BENCH_EXECUTOR_ID,
    ...(pool
      ? { poolSize: pool.size, dataDir: pool.dataDir, onPoolError: (err: unknown) => process.stderr.write(`bench: docker pool: ${String(err)}\n`) }
      : {}),
  });
}

export function defaultLimits(): Limits.ToolLimits {
  return { ...productModule<typeof Limits>('shared/limits').DEFAULT_LIMITS };
}

/** A workspace the sandbox uid (65534 for bwrap) may write to. */
export async function makeWorkspace(): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-bench-ws-')));
  await fs.chmod(dir, 0o777);
  return { dir, remove: () => fs.rm(dir, { recursive: true, force: true }) };
}

export async function startSandbox(name: BackendName, workspace: string, backend = createBackend(name)): Promise<Sandbox> {
  return backend.start({ workspace, limits: defaultLimits(), tenant: 'bench' });
}

const NEVER = new AbortController().signal;

/** One read_file of `path`; rejects unless it succeeded. */
export async function readFile(sandbox: Sandbox, path: string): Promise<void> {
  const result: ToolResult = await sandbox.call('read_file', { path }, NEVER);
  if (result.isError) throw new Error(`read_file failed: ${JSON.stringify(result).slice(0, 300)}`);
}

/** One run_command of `echo hi`; rejects unless it printed "hi". */
export async function echoHi(sandbox: Sandbox): Promise<void> {
  const result: ToolResult = await sandbox.call('run_command', { argv: ['echo', 'hi'] }, NEVER);
  const out = (result.structuredContent as { stdout?: unknown } | undefined)?.stdout;
  if (result.isError || out !== 'hi\n') throw new Error(`run_command echo hi failed: ${JSON.stringify(result).slice(0, 300)}`);
}

/**
 * Pids of the node processes running the sandbox agent under `root` (this process by default),
 * whatever wraps them (bwrap, setpriv): the agent's own memory, not its wrappers'.
 */
export function agentPids(root = process.pid): number[] {
  return processTree(root, childrenMap()).filter((pid) => {
    try {
      // By argv, not comm: Node 24 names its main thread "MainThread", and that is what comm shows.
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return /(^|\/)node$/.test(argv[0] ?? '') && argv.some((a) => a.endsWith('executor/agent/main.js'));
    } catch {
      return false; // gone
    }
  });
}

/** The agents' node processes of the bench's live sandboxes of backend `name` (none and bwrap: under this process). */
export async function sandboxAgentPids(name: BackendName): Promise<number[]> {
  return name === 'docker' ? (await dockerSandboxPids()).flatMap((init) => agentPids(init)) : agentPids();
}

/** Host pids of the bench's running docker sandboxes (each container's init; the agent is its child). */
export async function dockerSandboxPids(): Promise<number[]> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Docker = require('dockerode') as typeof import('dockerode');
  const list = await new Docker().listContainers({ filters: { label: [`toolgate.executor=${BENCH_EXECUTOR_ID}`] } });
  const pids = await Promise.all(list.map((c) => containerPid(c.Id)));
  return pids.filter((p): p is number => p !== undefined);
}

/**
 * The spawn floor, run as a command in the sandbox: a small non-Node process (python3: in the
 * sandbox image, and on the host for none and bwrap) does what `run_command` asks of the kernel —
 * three pipes, fork, a new session, exec of /bin/echo, read its output to EOF, wait — once
 * untimed, then once timed with its own clock. Neither its start nor the run_command carrying it
 * is timed: the figure is what starting `echo` costs in that sandbox, with no agent and no
 * round trip.
 */
const SPAWN_FLOOR_PY = `
import os, time
def once():
    i_r, i_w = os.pipe(); o_r, o_w = os.pipe(); e_r, e_w = os.pipe()
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid(); os.dup2(i_r, 0); os.dup2(o_w, 1); os.dup2(e_w, 2)
            os.execv('/bin/echo', ['echo', 'hi'])
        finally:
            os._exit(127)
    for fd in (i_r, i_w, o_w, e_w): os.close(fd)
    out = b''
    while True:
        b = os.read(o_r, 65536)
        if not b: break
        out += b
    while os.read(e_r, 65536): pass
    _, status = os.waitpid(pid, 0)
    ms = (time.perf_counter() - t) * 1000
    os.close(o_r); os.close(e_r)
    if out != b'hi\\n' or status != 0: raise SystemExit('echo failed: %r %d' % (out, status))
    return ms
once()
print('%.4f' % once())
`;

/** One spawn-floor measurement in `sandbox` (see SPAWN_FLOOR_PY): the timed spawn's milliseconds. */
export async function spawnFloor(sandbox: Sandbox): Promise<{ measuredMs: number }> {
  const result: ToolResult = await sandbox.call('run_command', { argv: ['python3', '-I', '-S', '-c', SPAWN_FLOOR_PY] }, NEVER);
  const out = (result.structuredContent as { stdout?: unknown; stderr?: unknown } | undefined) ?? {};
  const ms = Number(typeof out.stdout === 'string' ? out.stdout.trim() : NaN);
  if (result.isError || !Number.isFinite(ms)) throw new Error(`spawn floor failed: ${JSON.stringify(result).slice(0, 300)}`);
  return { measuredMs: ms };
}
