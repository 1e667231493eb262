/**
 * The MCP Inspector CLI (another real MCP client, fetched by npx from the npm registry) lists our
 * tools over Streamable HTTP against the real `toolgate serve`, as the gateway issue asks:
 * `npx @modelcontextprotocol/inspector --cli URL --transport http --header "Authorization: Bearer …" --method tools/list`,
 * with a private HOME.
 */
import { ChildProcess, execFile, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { signToken } from '../../shared/auth/token';
import { ALL_TOOLS } from '../../shared/tools/index';
import { freePort } from '../helpers/redis';

const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');
const INSPECTOR = '@modelcontextprotocol/inspector@2.12.0';
const SECRET = 'inspector-test-secret-0123456789abcdef';

let dir: string;
let serve: ChildProcess;
let url: string;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-inspector-'));
  const port = await freePort();
  url = `http://127.0.0.1:${port}/`;
  serve = spawn(process.execPath, [BIN, 'serve'], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TOOLGATE_PORT: String(port), TOOLGATE_DATA_DIR: path.join(dir, 'data'), TOOLGATE_JWT_SECRET: SECRET, TOOLGATE_SANDBOX: 'none', TOOLGATE_LOG_LEVEL: 'warn' },
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

test('npx @modelcontextprotocol/inspector --cli lists every tool', async () => {
  const now = Math.floor(Date.now() / 1000);
  const token = signToken({ id: 'inspector', permissions: ['file:read', 'file:write', 'file:list', 'system:exec', 'network:http'], iat: now, exp: now + 600 }, SECRET);
  const home = path.join(dir, 'home');
  await fs.mkdir(home);
  const { stdout } = await promisify(execFile)(
    'npx',
    ['-y', INSPECTOR, '--cli', url, '--transport', 'http', '--header', `Authorization: Bearer ${token}`, '--method', 'tools/list'],
    { env: { ...process.env, HOME: home, npm_config_update_notifier: 'false' }, timeout: 150_000, maxBuffer: 16 * 1024 * 1024 },
  );
  const listed = (JSON.parse(stdout) as { tools: Array<{ name: string }> }).tools.map((t) => t.name).sort();
  expect(listed).toEqual(ALL_TOOLS.map((t) => t.name).sort());
}, 160_000);
