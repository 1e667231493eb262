import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { killProcess } from '../../../shared/tools/commands/kill-process';
import { listProcesses } from '../../../shared/tools/commands/list-processes';
import { readProcessOutput } from '../../../shared/tools/commands/read-process-output';
import { startProcess } from '../../../shared/tools/commands/start-process';
import { writeProcessInput } from '../../../shared/tools/commands/write-process-input';
import { Harness, harness, isAlive, pids, waitDead } from './harness';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(() => h.close());

/** Reads with a wait until `pattern` shows in everything read so far (or the process exits). */
async function readUntil(handle: string, pattern: RegExp, harnessed = h): Promise<string> {
  let seen = '';
  for (let i = 0; i < 50 && !pattern.test(seen); i++) {
    const r = await harnessed.call(readProcessOutput, { handle, wait_ms: 200 });
    seen += r.structuredContent.data;
    if (!r.structuredContent.running && !r.structuredContent.more) break;
  }
  return seen;
}

async function waitExit(handle: string, harnessed = h): Promise<Record<string, any>> {
  for (let i = 0; i < 100; i++) {
    const [info] = harnessed.processes.list().filter((p) => p.handle === handle);
    if (info && !info.running) return info;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${handle} did not exit`);
}

describe('start_process with pipes', () => {
  test('returns a handle at once; input is written, output paged by byte offset', async () => {
    const started = await h.call(startProcess, { argv: ['cat'] });
    expect(started.structuredContent).toMatchObject({ handle: 'p1', running: true, pty: false, command: 'cat' });
    // Unknown yet: left out, not null (a nullable type is not portable: schema-portability.test.ts).
    expect(started.structuredContent).not.toHaveProperty('exitCode');
    expect(started.structuredContent).not.toHaveProperty('signal');
    expect(isAlive(started.structuredContent.pid)).toBe(true);

    await h.call(writeProcessInput, { handle: 'p1', input: 'hello\n' });
    const first = await h.call(readProcessOutput, { handle: 'p1', wait_ms: 5000 });
    expect(first.structuredContent).toMatchObject({ offset: 0, nextOffset: 6, data: 'hello\n', dropped: 0, running: true });
    expect(first.structuredContent).not.toHaveProperty('exitCode');

    await h.call(writeProcessInput, { handle: 'p1', input: 'world\n', eof: true });
    const info = await waitExit('p1');
    expect(info).toMatchObject({ exitCode: 0, signal: null, outputBytes: 12 });

    // Without an offset a read continues where the last one ended.
    const next = await h.call(readProcessOutput, { handle: 'p1' });
    expect(next.structuredContent).toMatchObject({ offset: 6, nextOffset: 12, data: 'world\n', running: false, exitCode: 0, more: false });
    // Any window by offset and length.
    const window = await h.call(readProcessOutput, { handle: 'p1', offset: 3, length: 5 });
    expect(window.structuredContent).toMatchObject({ offset: 3, nextOffset: 8, data: 'lo\nwo', more: true });
    const base64 = await h.call(readProcessOutput, { handle: 'p1', offset: 0, encoding: 'base64' });
    expect(Buffer.from(base64.structuredContent.data, 'base64').toString()).toBe('hello\nworld\n');
    // Past the end: nothing, at the end.
    const past = await h.call(readProcessOutput, { handle: 'p1', offset: 99 });
    expect(past.structuredContent).toMatchObject({ data: '', offset: 12, nextOffset: 12 });
  });

  test('stdout and stderr are interleaved in one stream; cwd and env apply', async () => {
    await fs.mkdir(path.join(h.root, 'sub'));
    process.env.TOOLGATE_JWT_SECRET = 'jwt-secret-must-not-leak';
    try {
      await h.call(startProcess, { command: 'pwd; echo "[$X][$TOOLGATE_JWT_SECRET]" >&2', cwd: 'sub', env: { X: 'x' } });
    } finally {
      delete process.env.TOOLGATE_JWT_SECRET;
    }
    await waitExit('p1');
    const out = await h.call(readProcessOutput, { handle: 'p1', offset: 0 });
    expect(out.structuredContent.data).toBe(`${path.join(h.root, 'sub')}\n[x][]\n`);
  });

  test('the buffer keeps the latest bytes and says how many were dropped', async () => {
    const small = await harness({ maxProcessBufferBytes: 1024 });
    try {
      await small.call(startProcess, { command: "printf '%05000d' 0; printf END" });
      await waitExit('p1', small);
      const r = await small.call(readProcessOutput, { handle: 'p1', offset: 0 });
      expect(r.structuredContent).toMatchObject({ offset: 5003 - 1024, dropped: 5003 - 1024, nextOffset: 5003, outputBytes: 5003 });
      expect(r.structuredContent.data).toHaveLength(1024);
      expect(r.structuredContent.data.endsWith('0END')).toBe(true);
      expect((r.content[0] as { text: string }).text).toContain(`${5003 - 1024} older bytes dropped`);
    } finally {
      await small.close();
    }
  });

  test('utf8 pages end on whole characters and the next page picks up the rest', async () => {
    await h.call(startProcess, { argv: ['printf', 'aé'] });
    await waitExit('p1');
    const first = await h.call(readProcessOutput, { handle: 'p1', length: 2 });
    expect(first.structuredContent).toMatchObject({ data: 'a', nextOffset: 1, more: true });
    const second = await h.call(readProcessOutput, { handle: 'p1' });
    expect(second.structuredContent).toMatchObject({ data: 'é', offset: 1, nextOffset: 3 });
  });

  test('a missing program is refused before a handle is made', async () => {
    await expect(h.call(startProcess, { argv: ['toolgate-no-such-program'] })).rejects.toThrow('Command not found');
    await expect(h.call(startProcess, { argv: ['toolgate-no-such-program'], pty: true })).rejects.toThrow('Command not found');
    await expect(h.call(startProcess, { argv: ['cat'], cwd: '..' })).rejects.toThrow(/Access denied/);
    expect(h.processes.list()).toEqual([]);
  });

  test('unknown handles and input to an exited process are clear errors', async () => {
    await expect(h.call(readProcessOutput, { handle: 'p42' })).rejects.toThrow('Unknown process handle: p42');
    await expect(h.call(killProcess, { handle: 'nope' })).rejects.toThrow('Unknown process handle');
    await h.call(startProcess, { argv: ['true'] });
    await waitExit('p1');
    await expect(h.call(writeProcessInput, { handle: 'p1', input: 'x' })).rejects.toThrow('has exited');
  });
});

describe('pty', () => {
  test('runs under a terminal: tty names a /dev/pts device and typed input is read', async () => {
    const started = await h.call(startProcess, { command: 'tty; echo "TERM=$TERM"; read line; echo "got [$line]"; read wait_forever', pty: true });
    expect(started.structuredContent).toMatchObject({ handle: 'p1', pty: true, running: true });
    expect(await readUntil('p1', /TERM=/)).toMatch(/^\/dev\/pts\/\d+\r\nTERM=xterm-256color/);
    await h.call(writeProcessInput, { handle: 'p1', input: 'hello pty\n' });
    expect(await readUntil('p1', /got \[/)).toContain('got [hello pty]');
    const killed = await h.call(killProcess, { handle: 'p1', signal: 'SIGKILL' });
    expect(killed.structuredContent).toMatchObject({ signalled: true, running: false, signal: 'SIGKILL' });
    expect(killed.structuredContent).not.toHaveProperty('exitCode');
  });

  test('eof sends Ctrl-D: the reader exits with its own status, not a hang-up', async () => {
    // cat leads its session here; a too-early close of the terminal would SIGHUP it as it exits.
    for (let i = 0; i < 5; i++) {
      const { handle } = (await h.call(startProcess, { argv: ['cat'], pty: true })).structuredContent;
      await h.call(writeProcessInput, { handle, input: 'abc\n', eof: true });
      expect(await waitExit(handle)).toMatchObject({ exitCode: 0, signal: null });
    }
  });

  test('a program that exits at once still delivers all its output', async () => {
    // 1..20000 with CRLF line ends: 88894 digits + 2 × 20000.
    for (let i = 0; i < 3; i++) {
      const { handle } = (await h.call(startProcess, { argv: ['seq', '1', '20000'], pty: true })).structuredContent;
      expect(await waitExit(handle)).toMatchObject({ exitCode: 0, outputBytes: 128894 });
      const tail = await h.call(readProcessOutput, { handle, offset: 128894 - 7 });
      expect(tail.structuredContent.data).toBe('20000\r\n');
    }
  });
});

describe('kill_process, list_processes, closeAll', () => {
  test('kill_process signals the whole group and reports the exit; output stays readable', async () => {
    await h.call(startProcess, { command: 'sleep 1000 & echo $!; wait' });
    const [grandchild] = pids(await readUntil('p1', /\d+\n/));
    expect(isAlive(grandchild!)).toBe(true);
    const r = await h.call(killProcess, { handle: 'p1' });
    expect(r.structuredContent).toMatchObject({ signalled: true, running: false, signal: 'SIGTERM' });
    expect(await waitDead(grandchild!)).toBe(true);
    expect((await h.call(readProcessOutput, { handle: 'p1', offset: 0 })).structuredContent.data).toBe(`${grandchild}\n`);
    const again = await h.call(killProcess, { handle: 'p1' });
    expect(again.structuredContent.signalled).toBe(false);
    expect((again.content[0] as { text: string }).text).toMatch(/already exited/);
  });

  test('list_processes shows every process with its state', async () => {
    expect((await h.call(listProcesses, {})).structuredContent).toEqual({ processes: [] });
    await h.call(startProcess, { argv: ['sleep', '1000'] });
    await h.call(startProcess, { command: 'exit 7' });
    await waitExit('p2');
    const r = await h.call(listProcesses, {});
    expect(r.structuredContent.processes).toMatchObject([
      { handle: 'p1', command: 'sleep 1000', running: true },
      { handle: 'p2', command: 'exit 7', running: false, exitCode: 7 },
    ]);
    expect((r.content[0] as { text: string }).text).toMatch(/p1 \(pid \d+\) running.*\np2 \(pid \d+\) exited with code 7/);
  });

  test('maxProcesses is enforced; an exited process is forgotten to make room', async () => {
    const small = await harness({ maxProcesses: 2 });
    try {
      await small.call(startProcess, { argv: ['sleep', '1000'] });
      await small.call(startProcess, { argv: ['sleep', '1000'] });
      await expect(small.call(startProcess, { argv: ['sleep', '1000'] })).rejects.toThrow(/Too many processes: 2 are running/);
      await small.call(killProcess, { handle: 'p1', signal: 'SIGKILL' });
      const third = await small.call(startProcess, { argv: ['sleep', '1000'] });
      expect(third.structuredContent.handle).toBe('p3');
      expect(small.processes.list().map((p) => p.handle)).toEqual(['p2', 'p3']);
      await expect(small.call(readProcessOutput, { handle: 'p1' })).rejects.toThrow('Unknown process handle: p1');
    } finally {
      await small.close();
    }
  });

  test('closeAll kills every process group, pty included, and refuses new ones', async () => {
    await h.call(startProcess, { command: 'sleep 1000 & echo $!; wait' });
    await h.call(startProcess, { command: 'sleep 1000 & echo $!; wait', pty: true });
    await h.call(startProcess, { argv: ['sleep', '1000'] });
    const grandchildren = [pids(await readUntil('p1', /\d+\n/))[0]!, pids(await readUntil('p2', /\d+\r\n/))[0]!];
    const leaders = h.processes.list().map((p) => p.pid);
    for (const pid of [...leaders, ...grandchildren]) expect(isAlive(pid)).toBe(true);
    h.processes.closeAll();
    for (const pid of [...leaders, ...grandchildren]) expect(await waitDead(pid)).toBe(true);
    await expect(h.call(startProcess, { argv: ['true'] })).rejects.toThrow(/shutting down/);
  });
});
