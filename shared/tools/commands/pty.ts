/**
 * Starting a program under a pseudo-terminal with node-pty, plus one workaround: node-pty closes
 * the master as soon as a read returns EIO, which Linux reports once every slave descriptor is
 * closed, even with output still buffered and even before the program has finished exiting. That
 * loses the end of the output (node-pty #72, #726) and can hang up the dying program, which then
 * reports SIGHUP instead of its exit code. Holding one slave descriptor open here until node-pty
 * reports the exit keeps the master readable; node-pty then drains it and closes it itself
 * (its own 200 ms fallback), so the exit is reported ≈ 200 ms later, with all output before it.
 */
import { closeSync, constants, openSync } from 'node:fs';
import type { IPty } from 'node-pty';
import { signalName } from './process-group';
import type { ProcessSpec } from './process-host';

export interface PtyProcess {
  pid: number;
  write(data: string): void;
}

export interface PtyHandlers {
  onData(chunk: Buffer): void;
  onExit(exitCode: number | null, signal: string | null): void;
}

export function spawnPty(spec: ProcessSpec, handlers: PtyHandlers): PtyProcess {
  const term: IPty = loadPty().spawn(spec.file, [...spec.args], {
    name: 'xterm-256color',
    cols: 120,
    rows: 30,
    cwd: spec.cwd,
    env: { ...spec.env },
    encoding: null, // Buffers, so offsets count bytes
  });
  const slave = holdSlave(term);
  // With `encoding: null` node-pty hands out Buffers, whatever its typings say.
  term.onData((d: string | Buffer) => handlers.onData(typeof d === 'string' ? Buffer.from(d) : d));
  term.onExit(({ exitCode, signal }) => {
    if (slave !== undefined) closeSync(slave);
    handlers.onExit(signal ? null : exitCode, signal ? signalName(signal) : null);
  });
  return { pid: term.pid, write: (data) => term.write(data) };
}

/** node-pty keeps the slave's path in `_pty` (internal, node-pty 1.x); without it we do without the workaround. */
function holdSlave(term: IPty): number | undefined {
  const slavePath = (term as unknown as { _pty?: unknown })._pty;
  if (typeof slavePath !== 'string' || !slavePath.startsWith('/dev/pts/')) return undefined;
  try {
    return openSync(slavePath, constants.O_RDWR | constants.O_NOCTTY);
  } catch {
    return undefined; // already gone: the program exited at once
  }
}

/** node-pty is a native addon: loaded on the first pty, not by every agent. */
let ptyModule: typeof import('node-pty') | undefined;
function loadPty(): typeof import('node-pty') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  ptyModule ??= require('node-pty') as typeof import('node-pty');
  return ptyModule;
}
