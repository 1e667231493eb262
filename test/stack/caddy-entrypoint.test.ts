/**
 * infra/caddy/entrypoint.sh, run by the host's sh with a stand-in `caddy` that prints the
 * environment it was started with: the checks that keep the proxy closed on a bad setting, the
 * API-key pattern, and the Content-Length pattern that must match exactly the lengths above the
 * limit. (The real Caddy with this script runs in caddy.test.ts and stack.test.ts.)
 */
import { spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ENTRYPOINT = path.resolve(__dirname, '../../infra/caddy/entrypoint.sh');
const KEY = 'key-0123456789abcdef';
const OTHER = 'Other_key_0123456789';

let dir: string;
let bin: string;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-caddy-entry-'));
  bin = path.join(dir, 'bin');
  await fs.mkdir(bin);
  // Stands in for caddy: prints its arguments and environment as JSON.
  await fs.writeFile(
    path.join(bin, 'caddy'),
    `#!${process.execPath}\nprocess.stdout.write(JSON.stringify({ argv: process.argv.slice(2), env: process.env }));\n`,
    { mode: 0o755 },
  );
});

afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

interface Started {
  status: number | null;
  stderr: string;
  argv: string[];
  env: Record<string, string>;
}

function start(env: Record<string, string>): Started {
  const r = spawnSync('sh', [ENTRYPOINT], {
    env: { PATH: `${bin}:/usr/bin:/bin`, XDG_DATA_HOME: path.join(dir, 'data'), ...env },
    encoding: 'utf8',
  });
  const out = r.status === 0 ? (JSON.parse(r.stdout) as { argv: string[]; env: Record<string, string> }) : { argv: [], env: {} };
  return { status: r.status, stderr: r.stderr, ...out };
}

describe('refuses to start a proxy that would let requests through', () => {
  test.each([
    ['no key at all', {}, /TOOLGATE_API_KEY is not set/],
    ['an empty key', { TOOLGATE_API_KEY: '' }, /TOOLGATE_API_KEY is not set/],
    ['only extra keys', { TOOLGATE_API_KEYS: KEY }, /TOOLGATE_API_KEY is not set/],
    ['a short key', { TOOLGATE_API_KEY: 'short-key' }, /shorter than 16/],
    ['a wildcard', { TOOLGATE_API_KEY: '*' }, /outside \[A-Za-z0-9_-\]/],
    ['a regex in the key', { TOOLGATE_API_KEY: 'abc.*0123456789abcdef' }, /outside/],
    ['a key that would break the Caddyfile', { TOOLGATE_API_KEY: 'abc}0123456789abcdef' }, /outside/],
    ['a bad second key', { TOOLGATE_API_KEY: KEY, TOOLGATE_API_KEYS: `${OTHER},bad|key0123456789abc` }, /key number 3/],
    ['a body limit that is not a number', { TOOLGATE_API_KEY: KEY, TOOLGATE_MAX_MESSAGE_BYTES: '16MB' }, /TOOLGATE_MAX_MESSAGE_BYTES/],
    ['a zero body limit', { TOOLGATE_API_KEY: KEY, TOOLGATE_MAX_MESSAGE_BYTES: '0' }, /TOOLGATE_MAX_MESSAGE_BYTES/],
    ['plain http', { TOOLGATE_API_KEY: KEY, TOOLGATE_SITE_ADDRESS: 'http://127.0.0.1:8080' }, /must start with https/],
    ['an unknown TLS mode', { TOOLGATE_API_KEY: KEY, TOOLGATE_TLS: 'acme' }, /internal or files/],
    ['an OAuth path of / (it would open POST / without the key)', { TOOLGATE_API_KEY: KEY, TOOLGATE_OAUTH_PATH: '/' }, /TOOLGATE_OAUTH_PATH/],
    ['an OAuth path with a space', { TOOLGATE_API_KEY: KEY, TOOLGATE_OAUTH_PATH: '/mcp /' }, /TOOLGATE_OAUTH_PATH/],
    ['an OAuth path without its slash', { TOOLGATE_API_KEY: KEY, TOOLGATE_OAUTH_PATH: 'mcp' }, /TOOLGATE_OAUTH_PATH/],
    ['TLS files that are not given', { TOOLGATE_API_KEY: KEY, TOOLGATE_TLS: 'files' }, /TOOLGATE_TLS_CERT_FILE/],
    [
      'TLS files that do not exist',
      { TOOLGATE_API_KEY: KEY, TOOLGATE_TLS: 'files', TOOLGATE_TLS_CERT_FILE: '/nonexistent.crt', TOOLGATE_TLS_KEY_FILE: '/nonexistent.key' },
      /cannot read/,
    ],
  ])('%s', (_name, env, message) => {
    const r = start(env as Record<string, string>);
    expect(r.status).toBe(64);
    expect(r.stderr).toMatch(message);
    // A refused key is never echoed back.
    expect(r.stderr).not.toContain('bad|key');
  });
});

describe('starts caddy with checked, derived settings', () => {
  test('defaults, the Caddyfile beside the script, and writes kept under the data directory', () => {
    const r = start({ TOOLGATE_API_KEY: KEY });
    expect(r.status).toBe(0);
    expect(r.argv).toEqual(['run', '--config', path.join(path.dirname(ENTRYPOINT), 'Caddyfile'), '--adapter', 'caddyfile']);
    expect(r.env).toMatchObject({
      TOOLGATE_SITE_ADDRESS: 'https://127.0.0.1:8443',
      TOOLGATE_BIND: '127.0.0.1',
      TOOLGATE_UPSTREAM: '127.0.0.1:3000',
      TOOLGATE_TLS: 'internal',
      TOOLGATE_OAUTH_PATH: '/mcp',
      TOOLGATE_MAX_MESSAGE_BYTES: '8388608',
      XDG_DATA_HOME: path.join(dir, 'data'),
      XDG_CONFIG_HOME: path.join(dir, 'data', 'config'),
      HOME: path.join(dir, 'data'),
    });
    // The raw keys do not stay in Caddy's environment; only the derived pattern does.
    expect(r.env.TOOLGATE_API_KEY).toBeUndefined();
    expect(r.env.TOOLGATE_API_KEYS).toBeUndefined();
    expect(r.stderr).toContain('1 API key(s)');
  });

  test('the key pattern accepts exactly the configured keys, whole', () => {
    const r = start({ TOOLGATE_API_KEY: KEY, TOOLGATE_API_KEYS: ` ${OTHER}, ,third-key-0123456789 ` });
    expect(r.status).toBe(0);
    expect(r.stderr).toContain('3 API key(s)');
    // Caddy uses Go's RE2; for this pattern (alternation of literals, anchors) JS agrees.
    const re = new RegExp(r.env.TOOLGATE_API_KEY_PATTERN!);
    for (const ok of [KEY, OTHER, 'third-key-0123456789']) expect(re.test(ok)).toBe(true);
    for (const bad of ['', KEY.slice(0, -1), `${KEY}x`, `x${KEY}`, KEY.toUpperCase(), `${KEY}|${OTHER}`, ` ${KEY}`, `${KEY} `]) {
      expect(re.test(bad)).toBe(false);
    }
  });

  test.each([1, 9, 10, 99, 100, 1000, 4096, 65535, 1048576, 16777216, 99999999, 100000000, 123456789012])(
    'the oversize pattern for a limit of %i matches exactly the longer bodies',
    (limit) => {
      const r = start({ TOOLGATE_API_KEY: KEY, TOOLGATE_MAX_MESSAGE_BYTES: String(limit) });
      expect(r.status).toBe(0);
      const re = new RegExp(r.env.TOOLGATE_OVERSIZE_PATTERN!);
      const around = [0, 1, limit - 1, limit, limit + 1, limit + 2, limit * 10, limit * 10 + 9, 10 ** String(limit).length, 10 ** String(limit).length - 1];
      const random = Array.from({ length: 200 }, () => Math.floor(Math.random() * limit * 3));
      for (const n of [...around, ...random].filter((v) => v >= 0)) {
        expect([n, re.test(String(n))]).toEqual([n, n > limit]);
      }
      // Leading zeros do not sneak a large body past it; junk is no Content-Length at all.
      expect(re.test(`000${limit + 1}`)).toBe(true);
      expect(re.test(`000${limit}`)).toBe(false);
      expect(re.test(`${limit + 1} `)).toBe(false);
    },
  );

  test('TLS from certificate files', async () => {
    const cert = path.join(dir, 'tls.crt');
    const key = path.join(dir, 'tls.key');
    await fs.writeFile(cert, 'cert');
    await fs.writeFile(key, 'key');
    const r = start({ TOOLGATE_API_KEY: KEY, TOOLGATE_TLS: 'files', TOOLGATE_TLS_CERT_FILE: cert, TOOLGATE_TLS_KEY_FILE: key });
    expect(r.status).toBe(0);
    expect(r.env).toMatchObject({ TOOLGATE_TLS: 'files', TOOLGATE_TLS_CERT_FILE: cert, TOOLGATE_TLS_KEY_FILE: key });
  });
});
