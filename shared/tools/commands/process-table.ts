/**
 * The ProcessHost of a sandbox agent: processes started by start_process, each the leader of its
 * own process group, with its output (stdout and stderr interleaved, or the terminal's) kept in a
 * bounded buffer that drops the oldest bytes.
 */
import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { ToolError } from '../../protocol/errors';
import type { ToolLimits } from '../../limits';
import { OutputBuffer } from './output-buffer';
import type { OutputPage, ProcessHost, ProcessInfo, ProcessSpec } from './process-host';
import { signalGroup } from './process-group';
import { PtyProcess, spawnPty } from './pty';
import { spawnError } from './spawn-error';
import { completeUtf8Length, leadingContinuationBytes } from './utf8';

/** After the leader exits, how long output still in its pipes may take before the exit is final. */
const DRAIN_AFTER_EXIT_MS = 500;

interface Entry {
  handle: string;
  spec: ProcessSpec;
  pid: number;
  startedAt: Date;
  started: number;
  ended?: number;
  exitCode: number | null;
  signal: string | null;
  /** Until the leader has exited and its output is in. */
  running: boolean;
  /** Something still holds the output pipes: the group may have members left after the leader. */
  open: boolean;
  /** `onEnded` was called for it. */
  reported: boolean;
  output: OutputBuffer;
  /** Where the next read without an offset starts. */
  cursor: number;
  changed: EventEmitter;
  inputClosed: boolean;
  write(data: string): void;
  endInput(): void;
}

type ProcessLimits = Pick<ToolLimits, 'maxProcesses' | 'maxProcessBufferBytes'>;

export class ProcessTable implements ProcessHost {
  private readonly entries = new Map<string, Entry>();
  private next = 1;
  private closed = false;

  /**
   * `onEnded(handle)` runs once per process, when it has exited and nothing holds its output any
   * more (a group member it left behind with the pipes keeps it live until it ends or is killed).
   */
  constructor(
    private readonly limits: ProcessLimits,
    private readonly onEnded?: (handle: string) => void,
  ) {}

  async start(spec: ProcessSpec): Promise<ProcessInfo> {
    if (this.closed) throw new ToolError('The sandbox is shutting down; no new processes');
    this.makeRoom();
    const entry = spec.pty ? this.spawnPty(spec) : await this.spawnPipes(spec);
    this.entries.set(entry.handle, entry);
    return this.info(entry);
  }

  read(handle: string, offset: number | undefined, length: number, text: boolean): OutputPage {
    const entry = this.get(handle);
    const asked = offset ?? entry.cursor;
    let { offset: start, data } = entry.output.read(asked, length);
    if (text) {
      // Whole UTF-8 characters only, as long as that leaves something to return.
      const skip = leadingContinuationBytes(data);
      const keep = completeUtf8Length(data.subarray(skip));
      if (keep > 0) {
        start += skip;
        data = data.subarray(skip, skip + keep);
      }
    }
    entry.cursor = start + data.length;
    return { offset: start, data, dropped: Math.max(0, start - asked), info: this.info(entry) };
  }

  waitForOutput(handle: string, offset: number, ms: number, signal: AbortSignal): Promise<void> {
    const entry = this.get(handle);
    return waitFor(entry, () => entry.output.end > offset || !entry.running, ms, signal);
  }

  write(handle: string, input: string, eof: boolean): ProcessInfo {
    const entry = this.get(handle);
    if (!entry.running) throw new ToolError(`Process ${handle} has exited; it takes no more input`);
    if (entry.inputClosed) throw new ToolError(`The input of process ${handle} was already closed`);
    if (input.length > 0) entry.write(input);
    if (eof) entry.endInput();
    return this.info(entry);
  }

  async kill(handle: string, signal: NodeJS.Signals, waitMs: number): Promise<{ signalled: boolean; info: ProcessInfo }> {
    const entry = this.get(handle);
    // Once the group is empty its id may be reused by an unrelated process: only signal while ours.
    const signalled = (entry.running || entry.open) && signalGroup(entry.pid, signal);
    if (signalled && waitMs > 0) await waitFor(entry, () => !entry.running, waitMs, new AbortController().signal);
    return { signalled, info: this.info(entry) };
  }

  list(): ProcessInfo[] {
    return [...this.entries.values()].map((e) => this.info(e));
  }

  closeAll(): void {
    this.closed = true;
    for (const entry of this.entries.values()) {
      if (entry.running || entry.open) signalGroup(entry.pid, 'SIGKILL');
    }
  }

  private get(handle: string): Entry {
    const entry = this.entries.get(handle);
    if (!entry) throw new ToolError(`Unknown process handle: ${handle} (list_processes shows the current ones)`);
    return entry;
  }

  /** Forgets the oldest exited process when the table is full; refuses when all are running. */
  private makeRoom(): void {
    if (this.entries.size < this.limits.maxProcesses) return;
    for (const entry of this.entries.values()) {
      if (entry.running) continue;
      if (entry.open) signalGroup(entry.pid, 'SIGKILL'); // nothing untracked may stay behind
      this.entries.delete(entry.handle);
      return;
    }
    throw new ToolError(`Too many processes: ${this.limits.maxProcesses} are running, the limit. Stop one with kill_process first`);
  }

  private newEntry(spec: ProcessSpec, pid: number, io: Pick<Entry, 'write' | 'endInput'>): Entry {
    return {
      handle: `p${this.next++}`,
      spec,
      pid,
      startedAt: new Date(),
      started: performance.now(),
      exitCode: null,
      signal: null,
      running: true,
      open: true,
      reported: false,
      output: new OutputBuffer(this.limits.maxProcessBufferBytes),
      cursor: 0,
      changed: new EventEmitter().setMaxListeners(0),
      inputClosed: false,
      ...io,
    };
  }

  private async spawnPipes(spec: ProcessSpec): Promise<Entry> {
    const child = spawn(spec.file, [...spec.args], { cwd: spec.cwd, env: spec.env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (err) => reject(spawnError(err, spec.file)));
    });
    child.on('error', () => undefined); // after a successful spawn there is nothing left to report
    const stdin = child.stdin!;
    stdin.on('error', () => undefined); // EPIPE: the process stopped reading
    const entry = this.newEntry(spec, child.pid!, {
      write: (data) => void stdin.write(data),
      endInput: () => {
        entry.inputClosed = true;
        stdin.end();
      },
    });
    const onData = (b: Buffer) => {
      entry.output.append(b);
      entry.changed.emit('change');
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    let drain: NodeJS.Timeout | undefined;
    child.on('exit', (code, signal) => {
      entry.exitCode = code;
      entry.signal = signal;
      drain = setTimeout(() => this.finish(entry), DRAIN_AFTER_EXIT_MS);
    });
    child.on('close', () => {
      clearTimeout(drain);
      entry.open = false;
      this.finish(entry);
      this.settle(entry);
    });
    return entry;
  }

  private spawnPty(spec: ProcessSpec): Entry {
    let entry: Entry | undefined;
    let term: PtyProcess;
    try {
      term = spawnPty(spec, {
        onData: (chunk) => {
          entry!.output.append(chunk);
          entry!.changed.emit('change');
        },
        onExit: (exitCode, signal) => {
          entry!.exitCode = exitCode;
          entry!.signal = signal;
          entry!.open = false;
          this.finish(entry!);
        },
      });
    } catch (err) {
      throw spawnError(err, spec.file);
    }
    entry = this.newEntry(spec, term.pid, {
      write: (data) => term.write(data),
      // A terminal has no separate input to close: Ctrl-D is end-of-file to a reader at line start.
      endInput: () => term.write('\x04'),
    });
    return entry;
  }

  private finish(entry: Entry): void {
    if (!entry.running) return;
    entry.running = false;
    entry.ended = performance.now();
    entry.changed.emit('change');
    this.settle(entry);
  }

  /** Reports the end once the process has exited and its output is closed. */
  private settle(entry: Entry): void {
    if (entry.running || entry.open || entry.reported) return;
    entry.reported = true;
    this.onEnded?.(entry.handle);
  }

  private info(e: Entry): ProcessInfo {
    return {
      handle: e.handle,
      pid: e.pid,
      command: e.spec.command,
      pty: e.spec.pty,
      running: e.running,
      exitCode: e.exitCode,
      signal: e.signal,
      startedAt: e.startedAt.toISOString(),
      durationMs: Math.round((e.ended ?? performance.now()) - e.started),
      outputBytes: e.output.end,
    };
  }
}

function waitFor(entry: Entry, done: () => boolean, ms: number, signal: AbortSignal): Promise<void> {
  if (done() || ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const stop = () => {
      clearTimeout(timer);
      entry.changed.off('change', check);
      signal.removeEventListener('abort', stop);
      resolve();
    };
    const check = () => done() && stop();
    const timer = setTimeout(stop, ms);
    entry.changed.on('change', check);
    signal.addEventListener('abort', stop, { once: true });
  });
}
