/**
 * The MCP Inspector CLI (another real MCP client, fetched by npx from the npm registry) lists our
 * tools over Streamable HTTP against the real `toolgate serve`, run exactly as the README writes
 * it (a shell line with a private HOME and a pinned version; only the URL and $TOKEN differ), on
 * the Node running the tests (20: an unpinned npx would pick an Inspector that rejects it).
 */
import { ChildProcess, execFile, spawn } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { signToken } from '../../shared/auth/token';
import { ALL_TOOLS } from '../../shared/tools/index';
import { freePort } from '../helpers/redis';

const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');
const README = readFileSync(path.resolve(__dirname, '../../README.md'), 'utf8');
/** The README's Inspector command line. */
const COMMAND = /^HOME=\$\(mktemp -d\) npx .*@modelcontextprotocol\/inspector.*$/m.exec(README)?.[0] ?? '';
const SECRET = 'inspector-test-secret-0123456789abcdef';

let dir: string;
let serve: ChildProcess;
let url: string;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-inspector-'));
  const port = await freePort();
  url = `http://127.0.0.1:${port}/`;
  serve = spawn(process.execPath, [BIN, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      TOOLGATE_PORT: String(port),
      TOOLGATE_DATA_DIR: path.join(dir, 'data'),
      TOOLGATE_JWT_SECRET: SECRET,
      TOOLGATE_SANDBOX: 'none',
      TOOLGATE_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    let err = '';
    serve.stderr!.setEncoding('utf8').on('data', (c: string) => {
      err += c;
      if (err.includes('listening on')) resolve();
    });
    serve.once('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)));
  });
}, 30_000);

afterAll(async () => {
  serve?.kill('SIGTERM');
  await fs.rm(dir, { recursive: true, force: true });
});

test("the README's Inspector command pins a version", () => {
  expect(COMMAND).toMatch(/@modelcontextprotocol\/inspector@\d+\.\d+\.\d+ --cli http:\/\/127\.0\.0\.1:3000\/ /);
});

test("the README's Inspector command, as written, lists every tool", async () => {
  const now = Math.floor(Date.now() / 1000);
  const token = signToken(
    { id: 'inspector', permissions: ['file:read', 'file:write', 'file:list', 'system:exec', 'network:http'], iat: now, exp: now + 600 },
    SECRET,
  );
  const line = COMMAND.replace('http://127.0.0.1:3000/', url);
  const tmp = path.join(dir, 'tmp');
  await fs.mkdir(tmp);
  const { stdout, stderr } = await promisify(execFile)('sh', ['-c', line], {
    // TMPDIR: the command's `mktemp -d` home lands in this test's directory and goes with it.
    env: { ...process.env, TOKEN: token, TMPDIR: tmp, npm_config_update_notifier: 'false' },
    timeout: 150_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  const listed = (JSON.parse(stdout) as { tools: Array<{ name: string }> }).tools.map((t) => t.name).sort();
  expect(listed).toEqual(ALL_TOOLS.map((t) => t.name).sort());
  // Its schema-portability lint has nothing to say (it printed "12 warnings across 6 tools" for
  // nullable types once; every rule is checked without it in test/tools/schema-portability.test.ts).
  expect(stderr).not.toMatch(/Schema portability/);
}, 160_000);
