import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { runCommand } from '../../../shared/tools/commands/run-command';
import { Harness, harness, isAlive, pids, waitDead } from './harness';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(() => h.close());

describe('run_command results', () => {
  test('a shell string runs under /bin/sh and reports exit code 0, stdout and stderr', async () => {
    const r = await h.call(runCommand, { command: 'echo out; echo err >&2' });
    expect(r.isError).toBeUndefined();
    expect(r.structuredContent).toMatchObject({ exitCode: 0, stdout: 'out\n', stderr: 'err\n', timedOut: false, truncated: false });
    // An unknown value is left out, not null: `["string","null"]` is not portable (schema-portability.test.ts).
    expect(r.structuredContent).not.toHaveProperty('signal');
    expect(r.structuredContent).not.toHaveProperty('stoppedForOutput');
    expect(r.content[0]).toMatchObject({ type: 'text' });
    const text = (r.content[0] as { text: string }).text;
    expect(text).toMatch(/^exit code 0 /);
    expect(text).toContain('--- stdout ---\nout\n');
    expect(text).toContain('--- stderr ---\nerr\n');
  });

  test('a non-zero exit is a normal result, not an error', async () => {
    const r = await h.call(runCommand, { command: 'echo nope >&2; exit 3' });
    expect(r.isError).toBeUndefined();
    expect(r.structuredContent).toMatchObject({ exitCode: 3, stderr: 'nope\n' });
    expect(r.structuredContent).not.toHaveProperty('signal');
  });

  test('death by a signal is reported by name', async () => {
    const r = await h.call(runCommand, { command: 'kill -TERM $$' });
    expect(r.structuredContent).toMatchObject({ signal: 'SIGTERM', timedOut: false });
    expect(r.structuredContent).not.toHaveProperty('exitCode');
    expect((r.content[0] as { text: string }).text).toMatch(/^killed by SIGTERM/);
  });

  test('argv is executed exactly, without a shell', async () => {
    const r = await h.call(runCommand, { argv: ['printf', '%s|', 'a b', '$HOME', '; echo x'] });
    expect(r.structuredContent.stdout).toBe('a b|$HOME|; echo x|');
  });

  test('stdin is written and closed', async () => {
    const r = await h.call(runCommand, { argv: ['cat'], stdin: 'line 1\nline 2\n' });
    expect(r.structuredContent.stdout).toBe('line 1\nline 2\n');
    // No stdin: the input is empty, so a reader does not hang.
    const empty = await h.call(runCommand, { argv: ['cat'], timeout_ms: 5000 });
    expect(empty.structuredContent).toMatchObject({ exitCode: 0, stdout: '', timedOut: false });
  });

  test('a command that ignores a large stdin still finishes normally', async () => {
    const r = await h.call(runCommand, { argv: ['true'], stdin: 'x'.repeat(2 * 1024 * 1024) });
    expect(r.structuredContent).toMatchObject({ exitCode: 0 });
  });
});

describe('run_command refusals', () => {
  test('exactly one of command and argv', () => {
    const none = runCommand.input.safeParse({});
    const both = runCommand.input.safeParse({ command: 'true', argv: ['true'] });
    for (const parsed of [none, both]) {
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.message).toMatch(/exactly one of `command`.*or `argv`/);
    }
    expect(runCommand.input.safeParse({ argv: [] }).success).toBe(false);
    expect(runCommand.input.safeParse({ command: 'a\0b' }).success).toBe(false);
  });

  test('env names are validated', () => {
    expect(runCommand.input.safeParse({ command: 'true', env: { 'BAD-NAME': 'x' } }).success).toBe(false);
    expect(runCommand.input.safeParse({ command: 'true', env: { '1X': 'x' } }).success).toBe(false);
    expect(runCommand.input.safeParse({ command: 'true', env: { OK_1: 'x\0y' } }).success).toBe(false);
    expect(runCommand.input.safeParse({ command: 'true', env: { _OK_1: 'x' } }).success).toBe(true);
  });

  test('a missing program is a clear tool error', async () => {
    await expect(h.call(runCommand, { argv: ['toolgate-no-such-program'] })).rejects.toThrow('Command not found: toolgate-no-such-program');
    await expect(h.call(runCommand, { argv: ['./missing.sh'] })).rejects.toThrow('Command not found: ./missing.sh');
  });

  test('a file without execute permission is refused', async () => {
    await fs.writeFile(path.join(h.root, 'script.sh'), '#!/bin/sh\necho hi\n', { mode: 0o644 });
    await expect(h.call(runCommand, { argv: ['./script.sh'] })).rejects.toThrow(/not executable/);
    await fs.chmod(path.join(h.root, 'script.sh'), 0o755);
    const r = await h.call(runCommand, { argv: ['./script.sh'] });
    expect(r.structuredContent.stdout).toBe('hi\n');
  });
});

describe('run_command cwd', () => {
  test('defaults to the workspace root and may be a directory inside it', async () => {
    await fs.mkdir(path.join(h.root, 'sub', 'deeper'), { recursive: true });
    expect((await h.call(runCommand, { argv: ['pwd'] })).structuredContent.stdout).toBe(`${h.root}\n`);
    expect((await h.call(runCommand, { argv: ['pwd'], cwd: 'sub/deeper' })).structuredContent.stdout).toBe(`${path.join(h.root, 'sub', 'deeper')}\n`);
    expect((await h.call(runCommand, { argv: ['pwd'], cwd: path.join(h.root, 'sub') })).structuredContent.stdout).toBe(`${path.join(h.root, 'sub')}\n`);
  });

  test('outside the workspace is refused, through .. , an absolute path or a symlink', async () => {
    await fs.symlink(path.dirname(h.root), path.join(h.root, 'up'));
    await expect(h.call(runCommand, { argv: ['pwd'], cwd: '..' })).rejects.toThrow(/Access denied/);
    await expect(h.call(runCommand, { argv: ['pwd'], cwd: '/' })).rejects.toThrow(/Access denied/);
    await expect(h.call(runCommand, { argv: ['pwd'], cwd: 'up' })).rejects.toThrow(/Access denied/);
  });

  test('a missing directory or a file is refused', async () => {
    await fs.writeFile(path.join(h.root, 'file.txt'), 'x');
    await expect(h.call(runCommand, { argv: ['pwd'], cwd: 'nope' })).rejects.toThrow('No such directory: nope');
    await expect(h.call(runCommand, { argv: ['pwd'], cwd: 'file.txt' })).rejects.toThrow('Not a directory: file.txt');
  });
});

describe('run_command environment', () => {
  const saved = { ...process.env };
  beforeEach(() => {
    process.env.TOOLGATE_JWT_SECRET = 'jwt-secret-must-not-leak';
    process.env.REDIS_URL = 'redis://:redis-password-must-not-leak@127.0.0.1:6379/0';
    process.env.TOOLGATE_API_KEYS = 'api-key-must-not-leak';
  });
  afterEach(() => {
    for (const k of ['TOOLGATE_JWT_SECRET', 'REDIS_URL', 'TOOLGATE_API_KEYS']) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });

  const envOf = (stdout: string): Record<string, string> =>
    Object.fromEntries(
      stdout
        .split('\0')
        .filter(Boolean)
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );

  test("a command sees only the fixed base plus its own env, never the server's variables", async () => {
    const r = await h.call(runCommand, { argv: ['env', '-0'], env: { MY_VAR: 'mine', LD_PRELOAD: '' } });
    const env = envOf(r.structuredContent.stdout);
    expect(env).toEqual({
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: h.root,
      LANG: 'C.UTF-8',
      SHLVL: '1',
      MY_VAR: 'mine',
      LD_PRELOAD: '',
    });
    expect(r.structuredContent.stdout).not.toMatch(/must-not-leak/);
  });

  test('a shell sees none of them either, and the caller may override the base', async () => {
    const r = await h.call(runCommand, { command: 'env; echo "[$TOOLGATE_JWT_SECRET][$REDIS_URL]"', env: { HOME: '/elsewhere' } });
    expect(r.structuredContent.stdout).not.toMatch(/must-not-leak/);
    expect(r.structuredContent.stdout).toContain('[][]');
    expect(r.structuredContent.stdout).toContain('HOME=/elsewhere');
  });
});

describe('run_command limits', () => {
  test('a timeout kills the whole process group, grandchildren included', async () => {
    const r = await h.call(runCommand, { command: 'sleep 1000 & echo $!; sleep 1000', timeout_ms: 500 });
    expect(r.isError).toBeUndefined();
    expect(r.structuredContent).toMatchObject({ timedOut: true, signal: 'SIGKILL' });
    expect(r.structuredContent).not.toHaveProperty('exitCode');
    expect((r.content[0] as { text: string }).text).toMatch(/^timed out after 500 ms/);
    const [grandchild] = pids(r.structuredContent.stdout);
    expect(grandchild).toBeGreaterThan(1);
    expect(await waitDead(grandchild!)).toBe(true);
  });

  test('whatever a finished command left running in its group is killed', async () => {
    const r = await h.call(runCommand, { command: 'sleep 1000 >/dev/null 2>&1 & echo $!' });
    expect(r.structuredContent).toMatchObject({ exitCode: 0, timedOut: false });
    const [left] = pids(r.structuredContent.stdout);
    expect(await waitDead(left!)).toBe(true);
  });

  test('the timeout is capped by the configured maximum', async () => {
    const small = await harness({ maxCommandTimeoutMs: 300 });
    try {
      const r = await small.call(runCommand, { argv: ['sleep', '1000'], timeout_ms: 3_600_000 });
      expect(r.structuredContent.timedOut).toBe(true);
      expect(r.structuredContent.durationMs).toBeLessThan(3_600_000);
    } finally {
      await small.close();
    }
  });

  test('endless output is drained and capped per stream, head and tail kept, until the timeout', async () => {
    const cap = 64 * 1024;
    // The hard cap out of reach: this is the timeout path, with output still flowing.
    const small = await harness({ maxOutputBytes: cap, maxCommandOutputBytes: Number.MAX_SAFE_INTEGER });
    try {
      const r = await small.call(runCommand, { command: 'yes; ', timeout_ms: 1000 });
      const s = r.structuredContent;
      expect(s.timedOut).toBe(true);
      expect(s).not.toHaveProperty('stoppedForOutput');
      expect(s.stdoutTruncated).toBe(true);
      expect(s.truncated).toBe(true);
      expect(s.stderrTruncated).toBe(false);
      const cut = s.stdoutBytes - cap;
      expect(s.stdout).toBe(`${'y\n'.repeat(cap / 4)}\n[… ${cut} bytes cut …]\n${'y\n'.repeat(cap / 4)}`);
      // It kept writing (the pipe was drained), far past what was kept.
      expect(s.stdoutBytes).toBeGreaterThan(cap * 4);
      expect((r.content[0] as { text: string }).text).toContain(`truncated: ${cut} of ${s.stdoutBytes} bytes cut from the middle`);
    } finally {
      await small.close();
    }
  });

  test('output past the hard cap stops the command at once; the head and the tail of each stream are kept', async () => {
    const flood = 8 * 1024 * 1024;
    const small = await harness({ maxOutputBytes: 64 * 1024, maxCommandOutputBytes: flood });
    try {
      // A build log: a first line, a flood (on both streams), then the line that matters, never reached.
      const command = 'echo first; echo err-first >&2; (yes >&2 &); yes; echo never';
      const started = Date.now();
      const r = await small.call(runCommand, { command, timeout_ms: 60_000 });
      const s = r.structuredContent;
      expect(Date.now() - started).toBeLessThan(30_000);
      expect(s).toMatchObject({ stoppedForOutput: true, timedOut: false, signal: 'SIGKILL', stdoutTruncated: true, truncated: true });
      expect(s).not.toHaveProperty('exitCode');
      // Past the cap, but bounded: killed at the first chunk over it (plus what was in flight).
      expect(s.stdoutBytes + s.stderrBytes).toBeGreaterThan(flood);
      expect(s.stdoutBytes + s.stderrBytes).toBeLessThan(flood * 4);
      expect(s.stdout.startsWith('first\ny\n')).toBe(true);
      expect(s.stdout).toMatch(/\n\[… \d+ bytes cut …\]\n(y\n)+$/);
      expect(s.stdout).not.toContain('never');
      expect(s.stderr.startsWith('err-first\n')).toBe(true);
      const text = (r.content[0] as { text: string }).text;
      expect(text).toMatch(/^stopped: its output passed 8388608 bytes \(TOOLGATE_MAX_COMMAND_OUTPUT_BYTES\); process group killed/);
    } finally {
      await small.close();
    }
  });

  test('the hard cap kills the whole process group', async () => {
    const small = await harness({ maxOutputBytes: 1024, maxCommandOutputBytes: 1024 * 1024 });
    try {
      const r = await small.call(runCommand, { command: 'sleep 1000 & echo $!; yes', timeout_ms: 60_000 });
      expect(r.structuredContent.stoppedForOutput).toBe(true);
      const [grandchild] = pids(r.structuredContent.stdout);
      expect(grandchild).toBeGreaterThan(1);
      expect(await waitDead(grandchild!)).toBe(true);
    } finally {
      await small.close();
    }
  });

  test('a cap that splits a UTF-8 character drops the partial character', async () => {
    const small = await harness({ maxOutputBytes: 5 });
    try {
      const r = await small.call(runCommand, { argv: ['printf', 'ééé'] }); // 6 bytes: head 3, tail 2
      expect(r.structuredContent).toMatchObject({ stdout: 'é\n[… 2 bytes cut …]\né', stdoutBytes: 6, stdoutTruncated: true });
      const cut = await small.call(runCommand, { argv: ['printf', 'aaéaé'] }); // the head ends inside the first é
      expect(cut.structuredContent.stdout).toBe('aa\n[… 3 bytes cut …]\né');
    } finally {
      await small.close();
    }
  });

  test('cancelling the call kills the process group', async () => {
    const abort = new AbortController();
    const run = h.call(runCommand, { command: 'sleep 1000 & echo $! > child.pid; wait' }, abort.signal);
    const pidFile = path.join(h.root, 'child.pid');
    for (let i = 0; i < 250 && !(await fs.stat(pidFile).catch(() => undefined))?.size; i++) await new Promise((r) => setTimeout(r, 20));
    const child = Number((await fs.readFile(pidFile, 'utf8')).trim());
    expect(isAlive(child)).toBe(true);
    abort.abort();
    await expect(run).rejects.toThrow(/cancelled/);
    expect(await waitDead(child)).toBe(true);
  });
});
