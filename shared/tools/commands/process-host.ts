/**
 * The sandbox's table of long-running processes (start_process and friends). One per sandbox
 * agent; every process it starts leads its own process group, so a signal reaches the process
 * and everything it spawned. Unknown handles and refused operations throw ToolError.
 */

/** What to start: an exact executable and argv, already checked against the workspace. */
export interface ProcessSpec {
  file: string;
  args: readonly string[];
  /** Absolute, inside the workspace. */
  cwd: string;
  /** The complete environment: nothing is inherited from the agent. */
  env: Readonly<Record<string, string>>;
  /** Run under a pseudo-terminal (node-pty, 120×30): one combined output stream. */
  pty: boolean;
  /** How list_processes shows it (the shell string, or argv joined). */
  command: string;
}

export interface ProcessInfo {
  /** Short, opaque, never reused within a table: `p1`, `p2`, … */
  handle: string;
  pid: number;
  command: string;
  pty: boolean;
  /** False once the process itself has exited (things it left behind may still run until killed). */
  running: boolean;
  exitCode: number | null;
  /** The signal that ended it, e.g. `SIGKILL`. */
  signal: string | null;
  startedAt: string;
  durationMs: number;
  /** Output produced so far: the offset the next byte will have. */
  outputBytes: number;
}

/** A window of a process's output. Offsets count every byte it ever wrote (stdout and stderr combined). */
export interface OutputPage {
  /** Where `data` starts: the asked offset, or the oldest byte kept when that was dropped. */
  offset: number;
  data: Buffer;
  /** Bytes between the asked offset and `offset` that the buffer no longer holds. */
  dropped: number;
  info: ProcessInfo;
}

export interface ProcessHost {
  /** Starts a process; refuses when `maxProcesses` are tracked and none has exited. */
  start(spec: ProcessSpec): Promise<ProcessInfo>;
  /**
   * Up to `length` bytes from `offset` (default: where the previous read of this handle ended).
   * With `text`, the page is trimmed to whole UTF-8 characters (the cut-off rest comes next time).
   */
  read(handle: string, offset: number | undefined, length: number, text: boolean): OutputPage;
  /** Resolves once output past `offset` exists or the process has exited, or after `ms`, or on abort. */
  waitForOutput(handle: string, offset: number, ms: number, signal: AbortSignal): Promise<void>;
  /** Writes to its stdin (or terminal); `eof` then closes stdin (a pty gets Ctrl-D). */
  write(handle: string, input: string, eof: boolean): ProcessInfo;
  /** Signals its whole process group; waits up to `waitMs` for it to exit. */
  kill(handle: string, signal: NodeJS.Signals, waitMs: number): Promise<{ signalled: boolean; info: ProcessInfo }>;
  list(): ProcessInfo[];
  /** SIGKILLs every process group and refuses new starts; called when the sandbox agent stops. */
  closeAll(): void;
}
