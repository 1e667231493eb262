/**
 * The engine of run_command: one process group, bounded output, a deadline. When the command
 * exits, whatever it left running in its group is killed too: a one-shot command owns its group
 * (start_process is for work that should outlive the call). A command whose output passes a hard
 * cap is killed as well: `yes` would otherwise burn a CPU until the deadline for bytes no one reads.
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { ToolError } from '../../protocol/errors';
import { HeadTailBuffer } from './head-tail-buffer';
import { LastLine } from './last-line';
import type { ProcessSpec } from './process-host';
import { signalGroup } from './process-group';
import { spawnError } from './spawn-error';

export interface RunOptions {
  stdin?: string | undefined;
  timeoutMs: number;
  /** Bytes kept per stream (its first and last halves). */
  maxOutputBytes: number;
  /** Bytes both streams may produce together before the process group is killed. */
  maxTotalOutputBytes: number;
  signal: AbortSignal;
  /** Called with the newest output line (stdout or stderr) as it arrives, for progress. */
  onLine?: (line: string) => void;
}

export interface RunOutcome {
  exitCode: number | null;
  signal: string | null;
  stdout: HeadTailBuffer;
  stderr: HeadTailBuffer;
  timedOut: boolean;
  /** The output passed `maxTotalOutputBytes` and the group was killed. */
  stoppedForOutput: boolean;
  durationMs: number;
}

/**
 * After the command exits, how long pipes held open by something that left its group (setsid)
 * may keep the call waiting.
 */
const DRAIN_AFTER_EXIT_MS = 500;

export function runToCompletion(spec: ProcessSpec, options: RunOptions): Promise<RunOutcome> {
  return new Promise((resolve, reject) => {
    if (options.signal.aborted) return reject(new ToolError('The command was cancelled before it started'));
    const started = performance.now();
    const stdout = new HeadTailBuffer(options.maxOutputBytes);
    const stderr = new HeadTailBuffer(options.maxOutputBytes);
    let child: ReturnType<typeof spawn>;
    try {
      // detached: setsid(), so the command leads a new process group (and session) we can kill whole.
      child = spawn(spec.file, [...spec.args], { cwd: spec.cwd, env: spec.env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    } catch (err) {
      return reject(spawnError(err, spec.file));
    }
    let timedOut = false;
    let stoppedForOutput = false;
    let cancelled = false;
    let exit: { code: number | null; signal: string | null } | undefined;
    let done = false;
    let drainTimer: NodeJS.Timeout | undefined;
    const killGroup = () => child.pid !== undefined && signalGroup(child.pid, 'SIGKILL');

    const finish = (failure?: ToolError) => {
      if (done) return;
      done = true;
      clearTimeout(deadline);
      clearTimeout(drainTimer);
      options.signal.removeEventListener('abort', onAbort);
      child.stdout?.destroy();
      child.stderr?.destroy();
      child.stdin?.destroy();
      if (failure) return reject(failure);
      if (cancelled) return reject(new ToolError('The command was cancelled; its process group was killed'));
      const durationMs = Math.round(performance.now() - started);
      resolve({ exitCode: exit?.code ?? null, signal: exit?.signal ?? null, stdout, stderr, timedOut, stoppedForOutput, durationMs });
    };
    // A timed-out command had its time: SIGKILL at once, no grace, so nothing outlives the call.
    const deadline = setTimeout(() => {
      timedOut = !stoppedForOutput;
      killGroup();
    }, options.timeoutMs);
    const onAbort = () => {
      cancelled = true;
      killGroup();
    };
    options.signal.addEventListener('abort', onAbort, { once: true });

    // Like a timeout, a flood gets no grace: SIGKILL once, at the first chunk past the cap.
    const checkFlood = () => {
      if (stoppedForOutput || timedOut || stdout.total + stderr.total <= options.maxTotalOutputBytes) return;
      stoppedForOutput = true;
      killGroup();
    };
    const lastOut = options.onLine ? new LastLine(options.onLine) : undefined;
    const lastErr = options.onLine ? new LastLine(options.onLine) : undefined;
    child.stdout!.on('data', (b: Buffer) => {
      stdout.append(b);
      lastOut?.append(b);
      checkFlood();
    });
    child.stderr!.on('data', (b: Buffer) => {
      stderr.append(b);
      lastErr?.append(b);
      checkFlood();
    });
    child.stdin!.on('error', () => undefined); // EPIPE: the command did not read its input
    child.stdin!.end(options.stdin ?? '');
    child.on('error', (err) => {
      if (child.pid === undefined) finish(spawnError(err, spec.file));
    });
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      killGroup();
      drainTimer = setTimeout(() => finish(), DRAIN_AFTER_EXIT_MS);
    });
    child.on('close', () => finish());
  });
}
