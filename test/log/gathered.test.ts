/**
 * JSON log lines are gathered before they are written (shared/log.ts): none may be lost or held
 * for long — a line waits at most the gather time, and every way a process ends (its event loop
 * empties, process.exit, an uncaught exception) still writes what was gathered.
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';

const LOG = path.resolve(__dirname, '../../dist/shared/log.js');

/** Runs `body` in a fresh node with `log` (a JSON logger at info); resolves with stderr's lines once it exits. */
function run(body: string, onLine?: (line: string, child: ReturnType<typeof spawn>) => void): Promise<string[]> {
  const script = `const log = require(${JSON.stringify(LOG)}).createLogger('info', 't', 'json');\n${body}`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    const before = err.split('\n').length;
    err += chunk;
    for (const line of err.split('\n').slice(before - 1, -1)) onLine?.(line, child);
  });
  return new Promise((resolve) => child.on('close', () => resolve(err.split('\n').filter(Boolean))));
}

const msgs = (lines: string[]) => lines.map((l) => (JSON.parse(l) as { msg: string }).msg);

describe('gathered JSON log lines', () => {
  it('writes every line when the event loop empties, in order (several gathered writes, the last lines still gathered at exit)', async () => {
    const want = Array.from({ length: 2000 }, (_, i) => `line ${i}`);
    const runs = await Promise.all(Array.from({ length: 4 }, () => run(`for (let i = 0; i < 2000; i++) log.info('line ' + i);`)));
    for (const lines of runs) expect(msgs(lines)).toEqual(want);
  });

  it('writes gathered lines on process.exit and on an uncaught exception', async () => {
    expect(msgs(await run(`log.info('a'); log.warn('b'); process.exit(0);`))).toEqual(['a', 'b']);
    const crashed = await run(`log.info('before the crash'); setTimeout(() => { throw new Error('boom'); }, 1);`);
    expect(crashed.some((l) => l.includes('before the crash'))).toBe(true);
  });

  it('writes a lone line of a process that stays up, without waiting for more', async () => {
    // The process stays alive until the test sees the line (then it is told to exit).
    const lines = await run(`log.info('alone'); process.on('SIGTERM', () => process.exit(0)); setInterval(() => undefined, 1000);`, (line, child) => {
      if (line.includes('alone')) child.kill('SIGTERM');
    });
    expect(msgs(lines)).toEqual(['alone']);
  });
});
