/**
 * `toolgate shim` start-up: bad settings stop it with exit 2 and a sentence naming the setting,
 * before anything connects, and never echo a secret.
 */
import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BIN, cleanEnv, TOKEN } from './shim-process';

async function run(
  args: string[],
  env: Record<string, string | undefined> = { TOOLGATE_TOKEN: TOKEN },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, 'shim', ...args], { env: cleanEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  child.stdin.end();
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, stdout, stderr };
}

test('--help prints the usage, with the environment it reads', async () => {
  const r = await run(['--help']);
  expect(r.code).toBe(0);
  expect(r.stdout).toContain('toolgate shim --url URL');
  expect(r.stdout).toContain('TOOLGATE_TOKEN');
  expect(r.stdout).toContain('TOOLGATE_API_KEY');
});

test.each([
  [[], /--url is required/],
  [['--url', 'not a url'], /--url is not a URL/],
  [['--url', 'ftp://127.0.0.1/'], /--url must be http:\/\/ or https:\/\//],
  [['--url', 'http://127.0.0.1/', '--ca', '/nonexistent'], /--ca only applies to an https:\/\/ --url/],
  [['--url', 'https://127.0.0.1/', '--ca', '/nonexistent/ca.crt'], /--ca \/nonexistent\/ca\.crt: cannot read it \(ENOENT\)/],
  [['--url', 'http://127.0.0.1/', '--timeout-ms', '0'], /--timeout-ms must be a whole number/],
  [['--url', 'http://127.0.0.1/', '--connect-timeout-ms', '1.5'], /--connect-timeout-ms must be a whole number/],
  [['--url', 'http://127.0.0.1/', '--bogus'], /unknown option --bogus/],
])('%j is refused with exit 2', async (args, message) => {
  const r = await run(args);
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(message);
  expect(r.stdout).toBe('');
});

test('no TOOLGATE_TOKEN: exit 2 naming it', async () => {
  const r = await run(['--url', 'http://127.0.0.1/'], {});
  expect(r.code).toBe(2);
  expect(r.stderr).toContain('TOOLGATE_TOKEN is not set');
});

test('a token or key that cannot be a header value is refused without being repeated', async () => {
  const bad = await run(['--url', 'http://127.0.0.1/'], { TOOLGATE_TOKEN: 'abc SECRET-inner def' });
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('TOOLGATE_TOKEN must be printable ASCII');
  expect(bad.stderr).not.toContain('SECRET-inner');
  const key = await run(['--url', 'http://127.0.0.1/'], { TOOLGATE_TOKEN: TOKEN, TOOLGATE_API_KEY: 'k\u00e9y' });
  expect(key.code).toBe(2);
  expect(key.stderr).toContain('TOOLGATE_API_KEY must be printable ASCII');
});

test('credentials in the URL are refused, and not echoed', async () => {
  const r = await run(['--url', 'https://user:SECRET-pw@127.0.0.1/']);
  expect(r.code).toBe(2);
  expect(r.stderr).toContain('--url must not carry credentials');
  expect(r.stderr).not.toContain('SECRET-pw');
});

test('a --ca file that is not a certificate is refused', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-shim-cli-'));
  try {
    await fs.writeFile(path.join(dir, 'ca.crt'), 'not a certificate\n');
    const r = await run(['--url', 'https://127.0.0.1/', '--ca', path.join(dir, 'ca.crt')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('not a PEM certificate file');
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
});
