/**
 * A wrong TOOLGATE_SECRETS_KEY as an operator meets it: the real `toolgate serve` over a secret
 * store another key sealed starts anyway, says why secrets are refused in one sentence, refuses
 * every secret use with that sentence (nothing is sent), and serves every other tool as usual.
 */
import { ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import type * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../helpers/ports';

const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');
const SEALED_WITH = randomBytes(32).toString('hex');
const GIVEN = randomBytes(32).toString('hex');
const VALUE = 'ghs_' + randomBytes(20).toString('hex');

let dir: string;
let serve: ChildProcess | undefined;
let api: http.Server;
const seen: Array<string | undefined> = [];

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-wrong-key-'));
  api = http.createServer((req, res) => {
    seen.push(req.headers.authorization);
    res.end('ok\n');
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  // Sealed with one key by `toolgate secret set`, the value on stdin.
  const set = execFile(process.execPath, [BIN, 'secret', 'set', '--id', 'alice', '--name', 'GH_TOKEN', '--host', '127.0.0.1'], {
    env: { PATH: process.env.PATH ?? '', TOOLGATE_DATA_DIR: dir, TOOLGATE_SECRETS_KEY: SEALED_WITH },
  });
  set.stdin!.end(VALUE);
  await new Promise<void>((resolve, reject) => set.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`secret set exited ${code}`)))));
});

afterAll(async () => {
  serve?.kill('SIGKILL');
  await new Promise((r) => api.close(r));
  await fs.rm(dir, { recursive: true, force: true });
});

it('starts, says why secrets are refused, refuses their use with that sentence and serves the rest', async () => {
  const port = await freePort();
  serve = spawn(process.execPath, [BIN, 'serve', '--port', String(port), '--sandbox', 'none'], {
    env: { PATH: process.env.PATH ?? '', TOOLGATE_DATA_DIR: dir, TOOLGATE_SECRETS_KEY: GIVEN, TOOLGATE_HTTP_ALLOW: '127.0.0.1/32', TOOLGATE_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  await new Promise<void>((resolve, reject) => {
    serve!.stderr!.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
      // The embedded executor says it as it starts, after the banner.
      if (stderr.includes('toolgate serve: then:') && stderr.includes('secret store')) resolve();
    });
    serve!.once('exit', (code) => reject(new Error(`serve exited with ${code}:\n${stderr}`)));
  });
  expect(stderr).toContain('TOOLGATE_SECRETS_KEY does not open the secret store');

  const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'token', '--id', 'alice'], {
    env: { PATH: process.env.PATH ?? '', TOOLGATE_DATA_DIR: dir },
  });
  const token = stdout.split('\n')[0]!.trim();
  const callTool = async (name: string, args: unknown) => {
    const res = await fetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
    });
    return ((await res.json()) as { result: { isError?: boolean; content: Array<{ text: string }> } }).result;
  };
  const url = `http://127.0.0.1:${(api.address() as net.AddressInfo).port}/`;
  const refused = await callTool('http_request', { url, headers: { Authorization: 'Bearer {{secret:GH_TOKEN}}' } });
  expect(refused.isError).toBe(true);
  expect(refused.content[0]!.text).toContain('TOOLGATE_SECRETS_KEY does not open the secret store');
  expect(seen).toEqual([]);

  expect((await callTool('http_request', { url })).isError).toBeUndefined();
  expect(seen).toEqual([undefined]);
  expect((await callTool('write_file', { path: 'a.txt', content: 'still here' })).isError).toBeUndefined();
  expect((await callTool('read_file', { path: 'a.txt' })).content[0]!.text).toContain('still here');
  expect(stderr + JSON.stringify(refused)).not.toContain(VALUE);
  expect(serve.exitCode).toBeNull();
}, 60_000);
