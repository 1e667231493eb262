/**
 * `toolgate token` is `generate-token` under toolgate's name: for the same command line and
 * environment both give the same exit status, the same messages (but for the program's name) and
 * tokens with the same claims. Both built CLIs (dist/) run as real processes.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import jwt, { JwtPayload } from 'jsonwebtoken';

const GENERATE = path.resolve(__dirname, '../../dist/bin/generate-token.js');
const TOOLGATE = path.resolve(__dirname, '../../dist/bin/toolgate.js');
const SECRET = 'env-secret-0123456789-0123456789-0123456789';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let tmp: string;
beforeAll(async () => {
  tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'toolgate-token-'));
});
afterAll(async () => {
  await fsp.rm(tmp, { recursive: true, force: true });
});

function run(argv: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      argv,
      { cwd: tmp, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TOOLGATE_DATA_DIR: path.join(tmp, 'none'), ...env } },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code) : 0, stdout, stderr }),
    );
  });
}

/** What must agree: the status, the texts with the name and the token's volatile parts masked, the claims. */
function comparable(r: Run, program: string) {
  const first = r.stdout.split('\n')[0] ?? '';
  const isToken = /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/.test(first);
  const claims = isToken ? (jwt.verify(first, SECRET, { algorithms: ['HS256'] }) as JwtPayload) : undefined;
  const mask = (s: string) =>
    s
      .split(program)
      .join('PROGRAM')
      .split(isToken ? first : '\0')
      .join('TOKEN')
      .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/g, 'DATE');
  return {
    code: r.code,
    stdout: mask(r.stdout),
    stderr: mask(r.stderr),
    claims: claims && { id: claims.id, permissions: claims.permissions, lifetime: claims.exp! - claims.iat! },
  };
}

const CASES: Array<[string, string[], Record<string, string>]> = [
  ['no arguments: the usage', [], {}],
  ['--help', ['--help'], {}],
  ['every default', ['--id', 'admin'], { TOOLGATE_JWT_SECRET: SECRET }],
  [
    'options, an empty value taking its default, a trimmed list',
    ['--id', 'bob', '--permissions', ' file:read, ,file:list', '--expires', '2h', '--url'],
    { TOOLGATE_JWT_SECRET: SECRET },
  ],
  ['--secret given', ['--id', 'carol', `--secret=${SECRET}`], {}],
  ['an unknown permission: exit 2', ['--permissions', 'file:read,file:exec'], { TOOLGATE_JWT_SECRET: SECRET }],
  ['no secret configured: exit 1', ['--id', 'dave'], {}],
  ['a bad duration: exit 1', ['--expires', '10y'], { TOOLGATE_JWT_SECRET: SECRET }],
  ['an unknown option: exit 2', ['--idd', 'x'], { TOOLGATE_JWT_SECRET: SECRET }],
  ['an option twice: exit 2', ['--id', 'a', '--id', 'b'], { TOOLGATE_JWT_SECRET: SECRET }],
  ['a bad TOOLGATE_* variable: exit 1', ['--id', 'a'], { TOOLGATE_JWT_SECRET: SECRET, TOOLGATE_PORT: 'x' }],
];

test.each(CASES)('%s: toolgate token answers as generate-token does', async (_name, args, env) => {
  const [viaGenerate, viaToolgate] = await Promise.all([run([GENERATE, ...args], env), run([TOOLGATE, 'token', ...args], env)]);
  const expected = comparable(viaGenerate, 'generate-token');
  expect(comparable(viaToolgate, 'toolgate token')).toEqual(expected);
  // The comparison is not vacuous: each case produced what its name says.
  expect(expected.stdout.length + expected.stderr.length).toBeGreaterThan(0);
});

test('the usage names the program it was run as', async () => {
  expect((await run([TOOLGATE, 'token', '--help'], {})).stdout).toMatch(/^Usage: toolgate token \[options\]/);
  expect((await run([TOOLGATE, '--help'], {})).stdout).toMatch(/\n {2}token +issue an access token/);
});
