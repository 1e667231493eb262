/**
 * Hostile commands through run_command on every sandbox backend (none; bwrap and docker where
 * they run): a fork bomb, a memory hog, endless output, and sleeping forever (plainly, ignoring
 * SIGTERM, and detached with setsid). Each probe is refused when it is contained — bounded,
 * killed, and the sandbox still serves — and leaked when something outlives its limits: a
 * process still running after the kill, output beyond the cap, a sandbox that stopped serving.
 *
 * Processes are found by a marker in their command line, counted from inside the sandbox (its
 * own /proc) by a node one-liner that receives the marker in pieces, so it never counts itself.
 *
 * What the backends bring, and so how each probe runs:
 * - docker: a pids limit and a memory cgroup: the bomb and the hog run as they are.
 * - bwrap: RLIMIT_NPROC on the sandbox uid (a uid of this suite's own here, so the bomb cannot
 *   starve other suites' sandboxes), but no memory limit: the hog runs under `prlimit --as`.
 * - none: nothing but the path checks, as root here: a real fork bomb would take the host, so
 *   it runs as an unused uid under `prlimit --nproc` (RLIMIT_NPROC binds only non-root); the hog
 *   runs under `prlimit --as`. Those wrappers are the probe's, not the backend's.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs, readdirSync, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { SandboxBackend } from '../../executor/sandbox/backend';
import { bwrapBackend } from '../../executor/sandbox/bwrap';
import { dockerBackend } from '../../executor/sandbox/docker/backend';
import { noneBackend } from '../../executor/sandbox/none';
import { SingleSandbox } from '../../executor/sandbox/single';
import { tenantUid } from '../../executor/tenant-names';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, SANDBOX_IMAGE, sandboxContainers } from '../helpers/docker';
import { tally } from './tally';

const OUTPUT_CAP = 64 * 1024;
const LIMITS = { ...DEFAULT_LIMITS, maxOutputBytes: OUTPUT_CAP };
const never = () => new AbortController().signal;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A marker unique to this run, in pieces: `[sep, ...parts]` joined by `sep`. */
const marker = (label: string): [string, string[]] => ['-', [label, String(process.pid), randomBytes(4).toString('hex')]];
/** A number unique to this run, for `sleep N`: its command line is then unique. */
const sleepSeconds = () => `1000.${process.pid}${randomBytes(2).readUInt16BE(0)}`;

interface RunResult {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  stderrBytes: number;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  truncated: boolean;
  timedOut: boolean;
}

/** A sleep that leaves the command's process group (and session), given time to do so before the command ends. */
const DETACHED = (seconds: string) => `setsid sleep ${seconds} >/dev/null 2>&1 < /dev/null & sleep 0.3; echo started`;

/** Counts processes whose command line contains argv[2..] joined by argv[1] (never itself: it holds only the pieces). */
const COUNT =
  "const fs=require('fs');const m=process.argv.slice(2).join(process.argv[1]);let n=0;for(const p of fs.readdirSync('/proc')){if(!/^[0-9]+$/.test(p))continue;try{if(fs.readFileSync('/proc/'+p+'/cmdline','latin1').includes(m))n++}catch{}}console.log(n)";

/** The same count on this host's /proc (for what must be gone after a sandbox stopped). */
function countOnHost(sep: string, parts: string[]): number {
  const m = parts.join(sep);
  return hostPids(m).length;
}
function hostPids(m: string): number[] {
  const pids: number[] = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readFileSync(`/proc/${p}/cmdline`, 'latin1').includes(m)) pids.push(Number(p));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

interface BackendCase {
  name: 'none' | 'bwrap' | 'docker';
  available: boolean;
  reason: string;
  backend(): SandboxBackend;
  /** The sandbox uid (the workspace is given to it; bwrap: a uid of this suite's own); undefined: the backend runs as this user. */
  uid?: number;
  setup?: () => Promise<void>;
  /** The fork bomb's command line, wrapped as this backend needs; a string instead: why it cannot run here. */
  bomb(script: string, mark: string): { command: string } | { skip: string };
  /** The memory hog's command line, wrapped as this backend needs. */
  hog(script: string): string;
  /** Whether the backend has a memory limit of its own (else the hog runs under prlimit --as). */
  memoryLimit: boolean;
}

const NONE_BOMB_UID = tenantUid(`hostile-commands-none-bomb`);
const BWRAP_UID = tenantUid(`hostile-commands-bwrap`);
const HOG_AS_BYTES = 256 * 1024 * 1024;

const cases: BackendCase[] = [
  {
    name: 'none',
    available: true,
    reason: '',
    backend: () => noneBackend(),
    bomb: (script, mark) =>
      isRoot && hasCommand('setpriv') && hasCommand('prlimit')
        ? { command: `setpriv --reuid ${NONE_BOMB_UID} --regid ${NONE_BOMB_UID} --clear-groups prlimit --nproc=32 sh -c '${script}' ${mark}` }
        : // Not root: no other uid to bound it with, and RLIMIT_NPROC on this user would hit its other processes.
          { skip: 'the none backend bounds a fork bomb only by running it as another uid under prlimit --nproc, which needs root and util-linux' },
    hog: (script) => `prlimit --as=${HOG_AS_BYTES} sh -c '${script}'`,
    memoryLimit: false,
  },
  {
    name: 'bwrap',
    available: hasCommand('bwrap') && isRoot,
    reason: 'needs bubblewrap (apt-get install bubblewrap) and root',
    backend: () => bwrapBackend(),
    uid: BWRAP_UID,
    bomb: (script, mark) => ({ command: `sh -c '${script}' ${mark}` }),
    hog: (script) => `prlimit --as=${HOG_AS_BYTES} sh -c '${script}'`,
    memoryLimit: false,
  },
  {
    name: 'docker',
    available: !dockerUnavailable,
    reason: dockerUnavailable ?? '',
    backend: () => dockerBackend({ image: SANDBOX_IMAGE, memoryMb: 128, pidsLimit: 64, executorId: `hostile-commands-${process.pid}` }),
    uid: 65534,
    setup: () => ensureSandboxImage(),
    bomb: (script, mark) => ({ command: `sh -c '${script}' ${mark}` }),
    hog: (script) => `sh -c '${script}'`,
    memoryLimit: true,
  },
];

function hostileCommands(c: BackendCase): void {
  const set = `hostile-commands[${c.name}]`;
  const tenant = `hostile-${c.name}`;
  let workspace: string;
  let single: SingleSandbox;

  const run = async (args: Record<string, unknown>): Promise<RunResult> => {
    const r = await (await single.get()).call('run_command', args, never());
    if (r.isError) throw new Error(`run_command failed: ${JSON.stringify(r.content).slice(0, 400)}`);
    return r.structuredContent as unknown as RunResult;
  };
  /** Processes in the sandbox whose command line carries the marker; undefined while the sandbox cannot spawn. */
  const countInside = async ([sep, parts]: [string, string[]]): Promise<number | undefined> => {
    const r = await run({ argv: ['node', '-e', COUNT, sep, ...parts], timeout_ms: 10_000 }).catch(() => undefined);
    return r?.exitCode === 0 ? Number(r.stdout.trim()) : undefined;
  };
  /** Polls until the marker's processes are gone (true) or `ms` passed (false). */
  const goneWithin = async (mark: [string, string[]], ms: number): Promise<boolean> => {
    const until = Date.now() + ms;
    for (;;) {
      if ((await countInside(mark)) === 0) return true;
      if (Date.now() > until) return false;
      await sleep(200);
    }
  };
  /** Whether the sandbox answers `echo alive` within `ms` (a fresh one, if the old one died). */
  const servingWithin = async (ms: number): Promise<boolean> => {
    const until = Date.now() + ms;
    for (;;) {
      const r = await run({ command: 'echo alive', timeout_ms: 5000 }).catch(() => undefined);
      if (r?.stdout === 'alive\n') return true;
      if (Date.now() > until) return false;
      await sleep(200);
    }
  };
  /** Records the probe and fails the test on anything short of contained. */
  const judge = (contained: boolean, leaked: boolean, detail: Record<string, unknown>) => {
    tally.probe(set, contained && !leaked, leaked);
    expect({ contained, leaked, ...detail }).toMatchObject({ contained: true, leaked: false });
  };

  beforeAll(async () => {
    await c.setup?.();
    workspace = await fs.mkdtemp(path.join(os.tmpdir(), `tg-hostile-${c.name}-`));
    if (c.uid !== undefined) {
      await fs.chmod(workspace, 0o755);
      await fs.chown(workspace, c.uid, c.uid);
    }
    single = new SingleSandbox(c.backend(), { workspace, limits: LIMITS, tenant, uid: c.uid });
    await single.get();
  }, 180_000);
  afterAll(async () => {
    await single?.stop();
    await fs.rm(workspace, { recursive: true, force: true });
    if (c.name === 'docker') expect(sandboxContainers(tenant)).toEqual([]);
  });

  test('control: the process counts see a running process by its marker, inside and on the host', async () => {
    const seconds = sleepSeconds();
    const mark: [string, string[]] = ['.', seconds.split('.')];
    const started = await (await single.get()).call('start_process', { command: `sleep ${seconds}` }, never());
    const handle = started.structuredContent?.handle as string;
    expect(handle).toBeTruthy();
    try {
      expect(await countInside(mark)).toBeGreaterThanOrEqual(1);
      expect(countOnHost(...mark)).toBeGreaterThanOrEqual(1);
    } finally {
      await (await single.get()).call('kill_process', { handle, signal: 'SIGKILL' }, never());
    }
    expect(await goneWithin(mark, 5000)).toBe(true);
  });

  test('fork bomb: stopped at the process limit, killed whole at the timeout; the sandbox serves again', async () => {
    const mark = marker('bomb');
    const bomb = c.bomb('bomb() { bomb | bomb & }; bomb; sleep 30', mark[1].join(mark[0]));
    if ('skip' in bomb) {
      console.warn(`SKIPPED fork bomb on ${c.name}: ${bomb.skip}`);
      return;
    }
    const r = await run({ command: bomb.command, timeout_ms: 3000 });
    // The shell says so each time a fork is refused: the bomb did reach the limit.
    const hitLimit = /Cannot fork|Resource temporarily unavailable/.test(r.stderr);
    const gone = await goneWithin(mark, 20_000);
    const serving = await servingWithin(20_000);
    // Whether the bomb's own shell lives to its timeout is a race: at the limit it may fail to fork
    // its `sleep` and exit first. Containment is the rest: the limit held, nothing survived, and
    // the sandbox serves again.
    judge(hitLimit && gone && serving, !gone || !serving, { timedOut: r.timedOut, hitLimit, gone, serving });
  }, 60_000);

  test(`memory hog: ${c.memoryLimit ? 'killed at the memory limit' : 'refused its memory under prlimit --as (this backend sets no memory limit)'}; the sandbox serves again`, async () => {
    if (!c.memoryLimit)
      console.warn(
        `hostile-commands[${c.name}]: the ${c.name} backend sets no memory limit of its own; the memory hog runs under prlimit --as=${HOG_AS_BYTES}`,
      );
    // `tail -n 1` keeps a line until its end: a gigabyte without a newline is a gigabyte held.
    let outcome: string;
    try {
      const r = await run({ command: `${c.hog('head -c 1G /dev/zero | tail -n 1 >/dev/null')}; echo "status $?"`, timeout_ms: 30_000 });
      outcome = r.stdout.trim();
    } catch (err) {
      // docker: the OOM killer may pick the agent itself; the call fails and a fresh sandbox takes over.
      outcome = err instanceof ProtocolError && err.code === ErrorCode.Unavailable ? 'agent killed' : `failed: ${String(err)}`;
    }
    const killed = c.memoryLimit ? /^status 137$|^agent killed$/.test(outcome) : /^status [1-9]\d*$/.test(outcome);
    const serving = await servingWithin(20_000);
    judge(killed && serving, !serving || outcome === 'status 0', { outcome, serving });
  }, 60_000);

  test.each([
    ['stdout', 'yes'],
    ['stderr', 'yes >&2'],
  ])(
    'endless output on %s: capped, killed at the timeout; the sandbox serves again',
    async (stream, command) => {
      const r = await run({ command, timeout_ms: 1500 });
      const kept = stream === 'stdout' ? r.stdout : r.stderr;
      const total = stream === 'stdout' ? r.stdoutBytes : r.stderrBytes;
      const truncated = stream === 'stdout' ? r.stdoutTruncated : r.stderrTruncated;
      const bounded = Buffer.byteLength(kept) <= OUTPUT_CAP;
      const serving = await servingWithin(10_000);
      judge(r.timedOut && truncated && total > OUTPUT_CAP && bounded && serving, !bounded || !serving, {
        timedOut: r.timedOut,
        truncated,
        kept: Buffer.byteLength(kept),
        total,
        serving,
      });
    },
    30_000,
  );

  test.each([
    ['sleep forever', (s: string) => `sleep ${s}`],
    ['sleep forever, in the background too, ignoring SIGTERM/SIGHUP/SIGINT', (s: string) => `trap "" TERM HUP INT; sleep ${s} & sleep ${s}; wait`],
  ])(
    '%s: timedOut at 500 ms and its process group dead',
    async (_name, command) => {
      const seconds = sleepSeconds();
      const [whole, fraction] = seconds.split('.') as [string, string];
      const mark: [string, string[]] = ['.', [whole, fraction]];
      const r = await run({ command: command(seconds), timeout_ms: 500 });
      const gone = await goneWithin(mark, 5000);
      const serving = await servingWithin(10_000);
      judge(r.timedOut && gone && serving, !gone || !serving, { timedOut: r.timedOut, gone, serving });
    },
    30_000,
  );

  if (c.name !== 'none') {
    test('sleep forever, detached with setsid: contained by the sandbox, gone when it stops', async () => {
      const seconds = sleepSeconds();
      const r = await run({ command: DETACHED(seconds), timeout_ms: 5000 });
      // Whatever run_command does about it, the sandbox's end is the wall: nothing of it may remain.
      await single.stop();
      let gone = false;
      for (let i = 0; i < 50 && !gone; i++) {
        gone = countOnHost('.', seconds.split('.')) === 0;
        if (!gone) await sleep(100);
      }
      const serving = await servingWithin(20_000); // a fresh sandbox for the tests after this one
      judge(r.stdout === 'started\n' && gone && serving, !gone, { started: r.stdout, gone, serving });
    }, 60_000);
  } else {
    // KNOWN GAP (reported): run_command kills the command's process group, and `none` has no wall
    // around it, so a `setsid` child leaves both behind and keeps running on the host. Not counted
    // as a probe while it is a known gap; this test turns red once it is fixed, to be moved up.
    test.failing(
      'KNOWN GAP: sleep forever, detached with setsid, is gone once the none sandbox stops',
      async () => {
        const seconds = sleepSeconds();
        try {
          await run({ command: DETACHED(seconds), timeout_ms: 5000 });
          await single.stop();
          await sleep(500);
          expect(countOnHost('.', seconds.split('.'))).toBe(0);
        } finally {
          // The leftover is this test's own child's child: end it by pid.
          for (const pid of hostPids(seconds)) {
            try {
              process.kill(pid, 'SIGKILL');
            } catch {
              // already gone
            }
          }
          await servingWithin(20_000);
        }
      },
      60_000,
    );
  }
}

for (const c of cases) {
  describeIf(c.available, c.reason, `hostile commands: ${c.name} backend`, () => hostileCommands(c));
}
