/**
 * Logs as an operator meets them, from the built binaries (dist/):
 *   - every request `toolgate serve` refuses as a whole (401, 413, 415, a parse error) is logged
 *     at info level with its status and reason, never with the token;
 *   - stderr that is a pipe gets JSON lines; stderr that is a terminal (a real pty) gets readable
 *     lines; TOOLGATE_LOG_FORMAT overrides the choice.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as pty from 'node-pty';
import { signToken } from '../../shared/auth/token';
import { ErrorCode } from '../../shared/protocol/errors';
import { freePort } from '../helpers/ports';

const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');
const SECRET = 'logs-test-secret-0123456789-0123456789';
// eslint-disable-next-line no-control-regex -- the terminal colour escape is what is matched
const READABLE = /^\d\d:\d\d:\d\d\.\d{3} (\x1b\[\d+m)?INFO /m;

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let dir: string;
const children: ChildProcess[] = [];
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-logs-'));
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await fs.rm(dir, { recursive: true, force: true });
});

describe('toolgate serve logs refused requests', () => {
  let stderr = '';
  let url: string;

  beforeAll(async () => {
    const port = await freePort();
    const child = spawn(process.execPath, [BIN, 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        TOOLGATE_PORT: String(port),
        TOOLGATE_DATA_DIR: dir,
        TOOLGATE_JWT_SECRET: SECRET,
        TOOLGATE_SANDBOX: 'none',
        TOOLGATE_LOG_LEVEL: 'info',
        TOOLGATE_MAX_MESSAGE_BYTES: '2048',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(child);
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    url = `http://127.0.0.1:${port}/`;
    await until('serve to listen', () => stderr.includes('toolgate serve ready'));
  }, 30_000);

  test('401, 413, 415 and a parse error: one JSON line each, with status and reason, without the token', async () => {
    const now = Math.floor(Date.now() / 1000);
    const good = signToken({ id: 'a', permissions: ['file:read'], iat: now, exp: now + 600 }, SECRET);
    const forged = signToken({ id: 'a', permissions: ['file:read'], iat: now, exp: now + 600 }, 'another-secret-0123456789-0123456789');
    const post = (token: string | undefined, body: string, type = 'application/json') =>
      fetch(url, { method: 'POST', headers: { 'Content-Type': type, ...(token ? { Authorization: `Bearer ${token}` } : {}) }, body });
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    expect((await post(undefined, ping)).status).toBe(401);
    expect((await post(forged, ping)).status).toBe(401);
    expect((await post(good, ping, 'text/plain')).status).toBe(415);
    expect((await post(good, 'x'.repeat(4096))).status).toBe(413);
    const parse = await post(good, '{"jsonrpc":"2.0",');
    expect(((await parse.json()) as { error: { code: number } }).error.code).toBe(-32700);
    expect((await post(good, ping)).status).toBe(200); // served: not a refusal

    const refusals = () =>
      stderr
        .split('\n')
        .filter((l) => l.includes('"request refused"'))
        .map((l) => JSON.parse(l) as { level: number; status: number; code: number; reason: string });
    await until('five refusal lines', () => refusals().length >= 5);
    const seen = refusals();
    expect(seen.map((r) => r.status)).toEqual([401, 401, 415, 413, 200]);
    const { Unauthenticated, InvalidRequest, MessageTooLarge, ParseError } = ErrorCode;
    expect(seen.map((r) => r.code)).toEqual([Unauthenticated, Unauthenticated, InvalidRequest, MessageTooLarge, ParseError]);
    for (const r of seen) expect(r.level).toBe(30);
    expect(seen[1]!.reason).toMatch(/another secret/);
    expect(seen[4]!.reason).toMatch(/line 1, column 18/);
    for (const token of [good, forged]) {
      expect(stderr).not.toContain(token);
      expect(stderr).not.toContain(token.split('.')[2]!);
    }
  });
});

describe('the log format follows stderr', () => {
  const stdioUnderPty = (env: Record<string, string>) => {
    const term = pty.spawn(process.execPath, [BIN, 'stdio', '--root', dir], {
      cols: 200,
      rows: 40,
      env: { PATH: process.env.PATH ?? '', TOOLGATE_LOG_LEVEL: 'info', ...env },
    });
    let out = '';
    term.onData((d) => (out += d));
    return { term, out: () => out };
  };

  test('a terminal gets readable lines', async () => {
    const { term, out } = stdioUnderPty({});
    try {
      await until('the ready line', () => out().includes('toolgate stdio ready'));
      expect(out()).toMatch(READABLE);
      expect(out()).toMatch(/INFO.* toolgate stdio ready {2}root=/);
      expect(out()).not.toContain('{"level"');
    } finally {
      term.kill('SIGKILL');
    }
  });

  test('TOOLGATE_LOG_FORMAT=json keeps JSON on a terminal', async () => {
    const { term, out } = stdioUnderPty({ TOOLGATE_LOG_FORMAT: 'json' });
    try {
      await until('the ready line', () => out().includes('toolgate stdio ready'));
      expect(out()).toContain('{"level":30');
      expect(out()).not.toMatch(READABLE);
    } finally {
      term.kill('SIGKILL');
    }
  });

  test.each([
    [
      'a pipe gets JSON lines',
      {},
      (s: string) =>
        s
          .split('\n')
          .filter(Boolean)
          .every((l) => l.startsWith('{"level"')),
    ],
    ['TOOLGATE_LOG_FORMAT=pretty gets readable lines on a pipe', { TOOLGATE_LOG_FORMAT: 'pretty' }, (s: string) => READABLE.test(s) && !s.includes('{"level"')],
  ])('%s', async (_name, env, check) => {
    const child = spawn(process.execPath, [BIN, 'stdio', '--root', dir], {
      env: { PATH: process.env.PATH ?? '', TOOLGATE_LOG_LEVEL: 'info', ...env },
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.stdin!.end();
    await new Promise((r) => child.once('close', r));
    expect(stderr).toContain('toolgate stdio ready');
    expect(check(stderr)).toBe(true);
  });
});
