/**
 * `none` never mixes tenants (DESIGN §7): the real `toolgate serve` on the `none` backend, where
 * a command can reach any workspace through `..`, says at start-up that it serves one identity,
 * serves the first that calls, and refuses every other identity's tool calls — the classic
 * cross-tenant reads among them — with a clear error. Each of the second identity's attempts is a
 * probe of `none-single-identity`: refused when the call gets the refusal and nothing of the first
 * tenant's comes back; leaked when anything does.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { workspaceName } from '../../executor/tenant-names';
import { PERMISSIONS } from '../../shared/auth/permissions';
import { signToken } from '../../shared/auth/token';
import { ErrorCode } from '../../shared/protocol/errors';
import { freePort } from '../helpers/ports';
import { BIN } from '../stdio/server';
import { tally } from './tally';

const SET = 'none-single-identity';
const SECRET = 'jwt-secret-for-none-single-identity';

interface Reply {
  result?: { content?: Array<{ text?: string }>; structuredContent?: Record<string, unknown>; isError?: boolean };
  error?: { code: number; message: string };
}

describe('toolgate serve on none serves one identity', () => {
  let dataDir: string;
  let url: string;
  let banner = '';
  let child: ReturnType<typeof spawn>;
  const marker = `ALICE-ONLY-${randomBytes(8).toString('hex')}`;
  const token = (id: string) => {
    const now = Math.floor(Date.now() / 1000);
    return signToken({ id, permissions: [...PERMISSIONS], iat: now, exp: now + 600 }, SECRET);
  };
  const callTool = async (id: string, name: string, args: Record<string, unknown>): Promise<Reply> => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${token(id)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
    });
    return (await res.json()) as Reply;
  };

  beforeAll(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-none-single-'));
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      TOOLGATE_LOG_LEVEL: 'warn',
      TOOLGATE_DATA_DIR: dataDir,
      TOOLGATE_PORT: String(await freePort()),
      TOOLGATE_SANDBOX: 'none',
      TOOLGATE_JWT_SECRET: SECRET,
    };
    child = spawn(process.execPath, [BIN, 'serve'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    url = await new Promise<string>((resolve, reject) => {
      child.stderr!.setEncoding('utf8').on('data', (c: string) => {
        banner += c;
        const m = /listening on (http:\/\/\S+)[^]*\ntoolgate serve: then: .*\n/.exec(banner);
        if (m) resolve(m[1]!);
      });
      child.once('exit', (code) => reject(new Error(`serve exited with ${code}:\n${banner}`)));
    });
  }, 60_000);
  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('says so at start-up', () => {
    expect(banner).toMatch(
      /sandbox "none" serves ONE identity: the first that calls a tool \(or set TOOLGATE_NONE_IDENTITY\); every other identity is refused/,
    );
  });

  it("serves the first identity and refuses a second one's every attempt, cross-tenant reads included", async () => {
    const wrote = await callTool('alice', 'write_file', { path: 'secret.txt', content: marker });
    expect(wrote.result?.isError).toBeFalsy();
    const aliceDir = workspaceName('alice');
    const aliceRoot = path.join(dataDir, 'workspaces', aliceDir);
    const attempts: Array<[string, Record<string, unknown>]> = [
      ['read_file', { path: `../${aliceDir}/secret.txt` }],
      ['read_file', { path: path.join(aliceRoot, 'secret.txt') }],
      ['run_command', { command: 'cat ../*/secret.txt' }],
      ['search_text', { path: '..', query: 'ALICE-ONLY' }],
      ['list_directory', { path: '..' }],
      ['write_file', { path: `../${aliceDir}/secret.txt`, content: 'overwritten' }],
      ['list_directory', {}],
      ['http_request', { url: 'http://127.0.0.1:1/' }],
    ];
    for (const [tool, args] of attempts) {
      const reply = await callTool('bob', tool, args);
      const body = JSON.stringify(reply);
      const leaked = body.includes(marker) || (await fs.readFile(path.join(aliceRoot, 'secret.txt'), 'utf8')) !== marker;
      const refused = reply.error?.code === ErrorCode.PermissionDenied && /serves a single identity/.test(reply.error.message);
      tally.probe(SET, refused && !leaked, leaked);
      expect({ tool, refused, leaked, body: refused ? '' : body }).toEqual({ tool, refused: true, leaked: false, body: '' });
    }
    // Bob never got a workspace or a sandbox; alice is still served.
    expect(await fs.readdir(path.join(dataDir, 'workspaces'))).toEqual([aliceDir]);
    expect((await callTool('alice', 'read_file', { path: 'secret.txt' })).result?.structuredContent?.content).toBe(marker);
  }, 60_000);
});
