/**
 * `generate-token` end to end: the built CLI (dist/, `npx tsc -p tsconfig.build.json`) run as a
 * real process with a controlled environment; every printed token is checked with jsonwebtoken
 * and the secret it must have been signed with.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import jwt, { JwtPayload } from 'jsonwebtoken';
import { PERMISSIONS } from '../../shared/auth/permissions';
import { ensureSecretFile } from '../../shared/auth/secret';
import { verifyToken } from '../../shared/auth/token';
import { SECRET_FILE_NAME } from '../../shared/config';
import { runTokenCli } from '../../bin/token-cli';

const BIN = path.resolve(__dirname, '../../dist/bin/generate-token.js');
const ENV_SECRET = 'env-secret-0123456789-0123456789-0123456789';
const DAY = 86_400;
const TOKEN_LINE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let tmp: string;
let dataDir: string;

beforeEach(async () => {
  tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'toolgate-gentoken-'));
  dataDir = path.join(tmp, 'data');
});
afterEach(async () => {
  await fsp.rm(tmp, { recursive: true, force: true });
});

/** No TOOLGATE_* variable leaks in from the test runner; each test states the ones it means. */
function run(args: string[], env: Record<string, string> = {}, cwd = tmp): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TOOLGATE_DATA_DIR: dataDir, ...env } },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code) : 0, stdout, stderr }),
    );
  });
}
const withEnvSecret = (args: string[]) => run(args, { TOOLGATE_JWT_SECRET: ENV_SECRET });

/** The token is alone on the first line; it must verify (HS256) with `secret`. */
function tokenOf(result: Run, secret = ENV_SECRET): { token: string; payload: JwtPayload } {
  expect(result.code).toBe(0);
  const token = result.stdout.split('\n')[0]!;
  expect(token).toMatch(TOKEN_LINE);
  const decoded = jwt.verify(token, secret, { algorithms: ['HS256'], complete: true });
  expect(decoded.header.alg).toBe('HS256');
  const payload = decoded.payload as JwtPayload;
  expect(Object.keys(payload)).toEqual(['id', 'permissions', 'iat', 'exp']);
  const now = Math.floor(Date.now() / 1000);
  expect(Math.abs(payload.iat! - now)).toBeLessThanOrEqual(5);
  return { token, payload };
}
const lifetime = (payload: JwtPayload) => payload.exp! - payload.iat!;
function expectNoToken(result: Run, code: number, stderr: RegExp) {
  expect(result.code).toBe(code);
  expect(result.stdout).toBe('');
  expect(result.stderr).toMatch(stderr);
}

describe('usage', () => {
  it('rule 2: no arguments prints the usage, exits 0 and issues no token (even with no secret)', async () => {
    const result = await run([]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Usage: generate-token/);
    for (const option of ['--id', '--permissions', '--expires', '--secret', '--url', '--help', '-h']) expect(result.stdout).toContain(option);
    expect(result.stdout).not.toMatch(/eyJ/);
    expect(result.stderr).toBe('');
  });

  it.each([[['--help']], [['-h']], [['--id', 'bob', '--help']], [['--bogus', '-h']]])('%j prints the usage and exits 0', async (args) => {
    const result = await withEnvSecret(args);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Usage: generate-token/);
    expect(result.stdout).not.toMatch(/eyJ/);
  });
});

describe('options and their defaults', () => {
  it('defaults: id admin, every permission, 30 days', async () => {
    const { payload } = tokenOf(await withEnvSecret(['--expires']));
    expect(payload.id).toBe('admin');
    expect(payload.permissions).toEqual([...PERMISSIONS]);
    expect(lifetime(payload)).toBe(30 * DAY);
  });

  it('--id sets the id', async () => {
    expect(tokenOf(await withEnvSecret(['--id', 'alice'])).payload.id).toBe('alice');
    expect(tokenOf(await withEnvSecret(['--id=carol'])).payload.id).toBe('carol');
  });

  it('rule 1: --id last with no value takes the default', async () => {
    const { payload } = tokenOf(await withEnvSecret(['--expires', '1h', '--id']));
    expect(payload.id).toBe('admin');
    expect(lifetime(payload)).toBe(3600);
  });

  it('--permissions: items trimmed, empty items dropped, order kept', async () => {
    const { payload } = tokenOf(await withEnvSecret(['--permissions', ' file:list , file:read,, ,']));
    expect(payload.permissions).toEqual(['file:list', 'file:read']);
  });

  it('rule 1: --permissions last with no value takes the default', async () => {
    const { payload } = tokenOf(await withEnvSecret(['--id', 'dave', '--permissions']));
    expect(payload.permissions).toEqual([...PERMISSIONS]);
  });

  it('--permissions with nothing in it issues a token that grants nothing, with a warning', async () => {
    const result = await withEnvSecret(['--permissions', ' , ']);
    expect(tokenOf(result).payload.permissions).toEqual([]);
    expect(result.stderr).toMatch(/warning: the token grants no permissions/);
  });

  it('an --id that is not well-formed Unicode is refused, exit 1, no token', () => {
    // In process: a process's argv arrives as UTF-8, where a lone surrogate is already U+FFFD.
    const out = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const err = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(runTokenCli(['--id', 'alice\ud800', '--secret', ENV_SECRET], 'generate-token')).toBe(1);
      expect(out).not.toHaveBeenCalled();
      expect(String(err.mock.calls[0]?.[0])).toMatch(/^generate-token: --id is not well-formed Unicode/);
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  });

  it('unknown permission values: refused, exit 2, each named, no token', async () => {
    const result = await withEnvSecret(['--permissions', 'file:read,file:delete,root']);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^generate-token: unknown permission "file:delete", "root" in --permissions; known: file:read, /);
    expect(result.stderr).toMatch(/no token was issued/);
  });

  it.each([
    ['45s', 45],
    ['15m', 900],
    ['1h', 3600],
    ['7d', 7 * DAY],
    ['30d', 30 * DAY],
    ['2w', 14 * DAY],
  ])('--expires %s sets exp = iat + %i', async (duration, seconds) => {
    expect(lifetime(tokenOf(await withEnvSecret(['--expires', duration])).payload)).toBe(seconds);
  });

  it('rule 1: --expires last with no value takes the default 30d', async () => {
    expect(lifetime(tokenOf(await withEnvSecret(['--id', 'erin', '--expires'])).payload)).toBe(30 * DAY);
  });

  it.each([['1.5h'], ['abc'], ['0d'], ['-1d'], ['7'], ['']])('--expires %p: a clear message, exit 1, no token', async (value) => {
    expectNoToken(await withEnvSecret(['--expires', value]), 1, /invalid duration .*whole number above 0 followed by s, m, h, d or w/);
  });

  it('--secret overrides the configured secret', async () => {
    const result = await withEnvSecret(['--secret', 'cli-secret-0123456789-0123456789-01']);
    const { token } = tokenOf(result, 'cli-secret-0123456789-0123456789-01');
    expect(() => jwt.verify(token, ENV_SECRET, { algorithms: ['HS256'] })).toThrow(/invalid signature/);
    expect(result.stderr).toBe('');
  });

  it('--secret accepts a value beginning with a dash, and --secret=--value', async () => {
    tokenOf(await run(['--secret', '-starts-with-a-dash-0123456789-0123']), '-starts-with-a-dash-0123456789-0123');
    tokenOf(await run(['--secret=--two-dashes-0123456789-0123456789']), '--two-dashes-0123456789-0123456789');
  });

  it('rule 1: --secret last with no value uses the configured secret', async () => {
    tokenOf(await withEnvSecret(['--id', 'frank', '--secret']));
  });

  it('an empty --secret is refused rather than silently replaced', async () => {
    expectNoToken(await withEnvSecret(['--secret', '']), 1, /--secret needs a non-empty value/);
  });

  it('a short secret is used, with a warning', async () => {
    const result = await run(['--secret', 'short']);
    tokenOf(result, 'short');
    expect(result.stderr).toMatch(/warning: the secret is shorter than 32 bytes/);
  });

  it('an option followed by another option takes its default (--id --permissions x)', async () => {
    const { payload } = tokenOf(await withEnvSecret(['--id', '--permissions', 'file:read']));
    expect(payload.id).toBe('admin');
    expect(payload.permissions).toEqual(['file:read']);
  });

  it('--url sets the base URL of the examples; last with no value, the default', async () => {
    const custom = await withEnvSecret(['--url', 'https://tools.example.test/base']);
    tokenOf(custom);
    expect(custom.stdout).toContain(`curl -X POST 'https://tools.example.test/base/'`);
    expect(custom.stdout).toContain(`fetch("https://tools.example.test/base/"`);
    const fallback = await withEnvSecret(['--url']);
    tokenOf(fallback);
    expect(fallback.stdout).toContain(`curl -X POST 'http://127.0.0.1:3000/'`);
  });

  it('a bad --url: exit 1, no token', async () => {
    expectNoToken(await withEnvSecret(['--url', 'not a url']), 1, /--url "not a url" is not a URL/);
    expectNoToken(await withEnvSecret(['--url', 'ftp://host/']), 1, /http:\/\/ or https:\/\//);
  });

  it('an empty --id is refused', async () => {
    expectNoToken(await withEnvSecret(['--id', '']), 1, /--id needs a non-empty value/);
    // The prefix of OAuth tenants' keys: the gateway refuses such a token, so none is issued.
    expectNoToken(await withEnvSecret(['--id', 'oauth:abc:alice']), 1, /--id must not start with "oauth:"/);
  });
});

describe('command-line errors: exit 2, no token', () => {
  it.each([
    [['--bogus'], /unknown option "--bogus"/],
    [['--bogus=1', '--id', 'x'], /unknown option "--bogus"/],
    [['-x'], /unknown option "-x"/],
    [['--ID', 'x'], /unknown option "--ID"/],
    [['alice'], /unexpected argument "alice"/],
    [['--id', 'a', 'b'], /unexpected argument "b"/],
    [['--id', 'a', '--id', 'b'], /--id is given more than once/],
  ])('%j', async (args, message) => {
    const result = await withEnvSecret(args);
    expectNoToken(result, 2, message);
    expect(result.stderr).toContain('--help');
  });
});

describe('where the secret comes from', () => {
  it('TOOLGATE_JWT_SECRET', async () => {
    tokenOf(await withEnvSecret(['--id', 'a']));
  });

  it('TOOLGATE_JWT_SECRET wins over the secret file', async () => {
    await fsp.mkdir(dataDir);
    await fsp.writeFile(path.join(dataDir, SECRET_FILE_NAME), 'file-secret-0123456789-0123456789-0123');
    tokenOf(await withEnvSecret(['--id', 'a']));
  });

  it('the secret file in TOOLGATE_DATA_DIR, trimmed', async () => {
    await fsp.mkdir(dataDir);
    await fsp.writeFile(path.join(dataDir, SECRET_FILE_NAME), 'file-secret-0123456789-0123456789-0123\n');
    tokenOf(await run(['--id', 'a']), 'file-secret-0123456789-0123456789-0123');
  });

  it('the secret file in ./.toolgate when TOOLGATE_DATA_DIR is unset', async () => {
    await fsp.mkdir(path.join(tmp, '.toolgate'));
    await fsp.writeFile(path.join(tmp, '.toolgate', SECRET_FILE_NAME), 'default-dir-secret-0123456789-012345');
    const result = await new Promise<Run>((resolve) =>
      execFile(process.execPath, [BIN, '--id', 'a'], { cwd: tmp, env: { PATH: process.env.PATH ?? '' } }, (err, stdout, stderr) =>
        resolve({ code: err ? Number(err.code) : 0, stdout, stderr }),
      ),
    );
    tokenOf(result, 'default-dir-secret-0123456789-012345');
  });

  it('the secret file `toolgate serve` creates on its first start', async () => {
    const { secret } = await ensureSecretFile(dataDir);
    const result = await run(['--id', 'tenant-7', '--permissions', 'file:read']);
    const { token } = tokenOf(result, secret);
    expect(verifyToken(token, secret)).toMatchObject({ id: 'tenant-7', permissions: ['file:read'] });
  });

  it('none configured: says so, exits 1, issues no token and creates no secret', async () => {
    const result = await run(['--id', 'a']);
    expectNoToken(result, 1, /no signing secret is configured/);
    expect(result.stderr).toContain('--secret');
    expect(result.stderr).toContain('TOOLGATE_JWT_SECRET');
    expect(result.stderr).toContain(path.join(dataDir, SECRET_FILE_NAME));
    await expect(fsp.stat(dataDir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('an empty secret file: names it, exits 1', async () => {
    await fsp.mkdir(dataDir);
    await fsp.writeFile(path.join(dataDir, SECRET_FILE_NAME), '\n');
    expectNoToken(await run(['--id', 'a']), 1, /secret file .*jwt-secret is empty/);
  });

  it('a bad TOOLGATE_* variable is reported, exit 1', async () => {
    expectNoToken(await run(['--id', 'a'], { TOOLGATE_LOG_LEVEL: 'loud' }), 1, /TOOLGATE_LOG_LEVEL must be one of/);
  });
});

describe('rule 3: what is printed with a token', () => {
  it('token alone on the first line, then user id, permissions and expiry as a date', async () => {
    const result = await withEnvSecret(['--id', 'grace', '--permissions', 'file:read,system:exec', '--expires', '7d']);
    const { payload } = tokenOf(result);
    const expiry = new Date(payload.exp! * 1000).toISOString().replace('.000Z', 'Z');
    expect(result.stdout).toMatch(/User ID:\s+grace\n/);
    expect(result.stdout).toMatch(/Permissions:\s+file:read, system:exec\n/);
    expect(result.stdout).toMatch(new RegExp(`Expires:\\s+${expiry} \\(in 1 week\\)\\n`));
    expect(result.stderr).toBe('');
  });

  it('examples: the header, a curl command and a fetch call that POST tools/list to the base URL', async () => {
    const seen: Array<{ method?: string; url?: string; auth?: string; type?: string; body: string }> = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, type: req.headers['content-type'], body });
        res.setHeader('content-type', 'application/json');
        res.end('{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const result = await withEnvSecret(['--url', `http://127.0.0.1:${port}`]);
      const { token } = tokenOf(result);
      const lines = result.stdout.split('\n');
      expect(lines).toContain(`    Authorization: Bearer ${token}`);

      const curlStart = lines.findIndex((l) => l.trimStart().startsWith('curl '));
      const curlEnd = lines.findIndex((l, i) => i >= curlStart && !l.endsWith('\\'));
      const curl = lines.slice(curlStart, curlEnd + 1).join('\n');
      const fetchStart = lines.findIndex((l) => l.includes('await fetch('));
      const fetchEnd = lines.findIndex((l, i) => i > fetchStart && l.includes('console.log('));
      const fetchCall = lines.slice(fetchStart, fetchEnd + 1).join('\n');

      const exec = (file: string, args: string[]) =>
        new Promise<string>((resolve, reject) =>
          execFile(file, args, { env: { PATH: process.env.PATH ?? '' } }, (err, stdout) => (err ? reject(err) : resolve(stdout))),
        );
      expect(await exec('sh', ['-c', curl])).toContain('"tools"');
      expect(await exec(process.execPath, ['--input-type=module', '-e', fetchCall])).toContain('tools');

      expect(seen).toHaveLength(2);
      for (const request of seen) {
        expect(request).toMatchObject({ method: 'POST', url: '/', auth: `Bearer ${token}`, type: 'application/json' });
        expect(JSON.parse(request.body)).toEqual({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
      }
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
