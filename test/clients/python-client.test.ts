/**
 * The Python `mcp` client (2.x) against a real `toolgate serve`, as the README tells Python users
 * to connect: examples/python/toolgate_client.py runs as written (the bearer header, a short
 * command, and long work through start_process + read_process_output), and the README's claim
 * about long calls holds — past the client's read timeout a call completes only when it asks for
 * progress. Needs python3 with the `mcp` package (.ci/run installs it).
 */
import { ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { describeIf } from '../helpers/availability';
import { freePort } from '../helpers/ports';

const REPO = path.resolve(__dirname, '../..');
const BIN = path.join(REPO, 'dist/bin/toolgate.js');

function pythonMcp(): string | undefined {
  try {
    execFileSync('python3', ['-c', 'import mcp, httpx2'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'needs python3 with the mcp package (pip install mcp)';
  }
}
const missing = pythonMcp();

describeIf(missing === undefined, missing ?? '', 'the Python mcp client', () => {
  let dataDir: string;
  let serve: ChildProcess;
  let env: Record<string, string>;

  beforeAll(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-python-'));
    const port = await freePort();
    serve = spawn(process.execPath, [BIN, 'serve'], {
      env: { PATH: process.env.PATH ?? '', TOOLGATE_DATA_DIR: dataDir, TOOLGATE_PORT: String(port), TOOLGATE_SANDBOX: 'none', TOOLGATE_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    await new Promise<void>((resolve, reject) => {
      let err = '';
      serve.stderr!.setEncoding('utf8').on('data', (c: string) => {
        err += c;
        if (err.includes('listening on')) resolve();
      });
      serve.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${err}`)));
    });
    const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'token', '--id', 'python', '--permissions', 'file:read,system:exec'], {
      env: { PATH: process.env.PATH ?? '', TOOLGATE_DATA_DIR: dataDir },
    });
    env = { PATH: process.env.PATH ?? '', HOME: os.homedir(), TOOLGATE_URL: `http://127.0.0.1:${port}/`, TOOLGATE_TOKEN: stdout.split('\n')[0]!.trim() };
  }, 60_000);

  afterAll(async () => {
    serve?.kill('SIGTERM');
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  test('the README example runs as written: bearer header, a short command, long work paged by offset', async () => {
    const { stdout } = await promisify(execFile)('python3', [path.join(REPO, 'examples/python/toolgate_client.py')], { env, timeout: 60_000 });
    expect(stdout).toMatch(/^tools: .*\bread_process_output\b.*\bstart_process\b/m);
    expect(stdout).toContain('short: hello from python');
    expect(stdout).toContain('step 1\nstep 2\nstep 3\n');
    expect(stdout).toContain('exit code: 0');
  }, 90_000);

  test('past its read timeout a call completes with progress and fails without', async () => {
    const { stdout } = await promisify(execFile)('python3', [path.join(__dirname, 'fixtures/progress_probe.py')], { env, timeout: 60_000 });
    expect(stdout).toMatch(/^with progress: completed exit=0 progress=[1-9]/m);
    expect(stdout).toMatch(/^without progress: failed /m);
  }, 90_000);
});
