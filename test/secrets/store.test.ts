/**
 * The secret store in both places (the data directory and a real Redis): values sealed at rest,
 * names, hosts and header templates listed without values, tenants kept apart, a missing,
 * malformed or wrong key refused with a sentence (never a crash), key rotation, and
 * `toolgate secret set|list|rm|rotate-key` with the value from stdin or a file.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { runSecret } from '../../bin/commands/secret';
import { UsageError } from '../../bin/flags';
import { fileSecretBackend, redisSecretBackend, SecretBackend, SECRETS_FILE } from '../../executor/secrets/backends';
import { createSecretStore } from '../../executor/secrets/store';
import { closeConnection, failFastConnection, waitReady } from '../../shared/bus/redis-connections';
import { loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/log';
import { SecretsUnavailable } from '../../shared/secrets/broker';
import { describeRedis, startRedis, TestRedis, urlConfig } from '../helpers/redis';

const KEY = randomBytes(32).toString('hex');
const OTHER = randomBytes(32).toString('base64');
const VALUE = 'ghp_' + randomBytes(18).toString('hex');

let dir: string;
beforeEach(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-secrets-'));
});
afterEach(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

function contract(name: string, backend: () => SecretBackend, raw: () => Promise<string>): void {
  describe(name, () => {
    it('stores a value sealed, lists it without the value, opens it for its tenant only', async () => {
      const store = createSecretStore(backend(), KEY);
      await store.set('alice', { name: 'GH_TOKEN', host: ' api.github.test, *.github.test ', header: 'Authorization:Bearer {value}', value: VALUE });
      expect(await raw()).not.toContain(VALUE);
      expect(await store.list('alice')).toEqual([
        { name: 'GH_TOKEN', host: 'api.github.test,*.github.test', header: 'Authorization: Bearer {value}', updatedAt: expect.any(String) },
      ]);
      const [open] = await store.open('alice');
      expect(open).toMatchObject({ name: 'GH_TOKEN', value: VALUE, header: { name: 'Authorization', template: 'Bearer {value}' } });
      expect(open?.matches('api.github.test', 443)).toBe(true);
      expect(open?.matches('x.github.test', 80)).toBe(true);
      expect(open?.matches('github.test', 443)).toBe(false);
      expect(open?.matches('api.github.test', 8443)).toBe(false);
      expect(await store.open('bob')).toEqual([]);
      expect(await store.names('alice')).toEqual(['GH_TOKEN']);
      expect(await store.remove('alice', 'GH_TOKEN')).toBe(true);
      expect(await store.remove('alice', 'GH_TOKEN')).toBe(false);
      expect(await store.open('alice')).toEqual([]);
    });

    it('refuses bad names, hosts, headers and values by field, never echoing the value', async () => {
      const store = createSecretStore(backend(), KEY);
      const base = { name: 'TOKEN', host: 'a.test', value: VALUE };
      await expect(store.set('a', { ...base, name: 'lower' })).rejects.toThrow('--name "lower" is not valid');
      await expect(store.set('a', { ...base, host: 'http://a.test/' })).rejects.toThrow('--host');
      await expect(store.set('a', { ...base, header: 'Authorization Bearer' })).rejects.toThrow('--header must be');
      await expect(store.set('a', { ...base, value: 'short' })).rejects.toThrow('at least 8 characters');
      const bad = store.set('a', { ...base, value: `${VALUE}\nX-Evil: 1` });
      await expect(bad).rejects.toThrow('control characters');
      await expect(bad).rejects.not.toThrow(VALUE);
    });

    it('refuses every operation without a key, with a malformed key, or with a key that does not open the store', async () => {
      await createSecretStore(backend(), KEY).set('alice', { name: 'T', host: 'a.test', value: VALUE });
      await expect(createSecretStore(backend(), undefined).list('alice')).rejects.toThrow('TOOLGATE_SECRETS_KEY is not set');
      await expect(createSecretStore(backend(), 'abc').open('alice')).rejects.toThrow('is not a valid key');
      const wrong = createSecretStore(backend(), OTHER);
      await expect(wrong.open('alice')).rejects.toBeInstanceOf(SecretsUnavailable);
      await expect(wrong.set('alice', { name: 'U', host: 'a.test', value: VALUE })).rejects.toThrow('does not open the secret store');
    });

    it('rotates every tenant to a new key (resumable), after which only the new key opens the store', async () => {
      const old = createSecretStore(backend(), KEY);
      await old.set('alice', { name: 'A', host: 'a.test', value: VALUE });
      await old.set('bob', { name: 'B', host: 'b.test', value: VALUE + 'b' });
      const next = createSecretStore(backend(), OTHER);
      await expect(next.rotate(undefined)).rejects.toThrow('TOOLGATE_SECRETS_KEY_OLD is not set');
      expect(await next.rotate(KEY)).toBe(2);
      expect(await next.rotate(KEY)).toBe(0);
      expect((await next.open('bob'))[0]?.value).toBe(VALUE + 'b');
      await expect(old.open('alice')).rejects.toThrow('does not open the secret store');
      await expect(createSecretStore(backend(), randomBytes(32).toString('hex')).rotate(randomBytes(32).toString('hex'))).rejects.toThrow('neither');
    });

    it('a sealed value moved to another tenant or host rule no longer opens', async () => {
      const b = backend();
      const store = createSecretStore(b, KEY);
      await store.set('alice', { name: 'T', host: 'a.test', value: VALUE });
      const rec = (await b.records('alice')).get('T')!;
      await b.put('mallory', 'T', rec);
      await b.put('alice', 'T', { ...rec, host: 'evil.test' });
      expect(await store.open('mallory')).toEqual([]);
      expect(await store.open('alice')).toEqual([]);
    });
  });
}

contract(
  'data directory store',
  () => fileSecretBackend(dir),
  () => fs.readFile(path.join(dir, SECRETS_FILE), 'utf8'),
);

it('the data directory file is mode 0600', async () => {
  await createSecretStore(fileSecretBackend(dir), KEY).set('alice', { name: 'T', host: 'a.test', value: VALUE });
  expect((await fs.stat(path.join(dir, SECRETS_FILE))).mode & 0o777).toBe(0o600);
});

it('a reader keeps its parse of the file only while the file is the same: another writer is seen at the next read', async () => {
  const reader = createSecretStore(fileSecretBackend(dir), KEY);
  const writer = createSecretStore(fileSecretBackend(dir), KEY);
  expect(await reader.names('alice')).toEqual([]);
  await writer.set('alice', { name: 'A_TOKEN', host: 'a.test', value: VALUE });
  expect(await reader.names('alice')).toEqual(['A_TOKEN']);
  expect(await reader.names('alice')).toEqual(['A_TOKEN']); // kept
  await writer.set('alice', { name: 'B_TOKEN', host: 'b.test', value: VALUE });
  await writer.remove('alice', 'A_TOKEN');
  expect(await reader.names('alice')).toEqual(['B_TOKEN']);
  expect((await reader.open('alice')).map((s) => [s.name, s.value])).toEqual([['B_TOKEN', VALUE]]);
  // Edited in place (same inode, same size; mtime has a clock tick's grain, hence the wait): the
  // check no longer opens with this key, at the next read.
  await new Promise((r) => setTimeout(r, 20));
  await fs.writeFile(
    path.join(dir, SECRETS_FILE),
    (await fs.readFile(path.join(dir, SECRETS_FILE), 'utf8')).replace(/"iv": "[^"]+"/, '"iv": "AAAAAAAAAAAAAAAA"'),
  );
  await expect(reader.names('alice')).rejects.toThrow(SecretsUnavailable);
});

describeRedis('Redis store', () => {
  let redis: TestRedis;
  let client: ReturnType<typeof failFastConnection>;
  beforeAll(async () => {
    redis = await startRedis();
    client = failFastConnection(urlConfig(redis.url), 'secrets-test');
    await waitReady(client, urlConfig(redis.url), 5000);
  });
  afterAll(async () => {
    await closeConnection(client);
    await redis.close();
  });
  beforeEach(async () => {
    await client.flushall();
  });
  contract(
    'on Redis',
    () => redisSecretBackend(client),
    async () =>
      JSON.stringify(await Promise.all((await client.keys('toolgate:secrets:*')).map((k) => client.dumpBuffer(k).then((b) => b?.toString('latin1'))))),
  );
});

/** Runs `toolgate secret …` in process with `stdin`, capturing stdout and stderr. */
async function cli(env: Record<string, string>, argv: string[], stdin = ''): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const out = jest.spyOn(process.stdout, 'write').mockImplementation((c) => ((stdout += String(c)), true));
  const err = jest.spyOn(process.stderr, 'write').mockImplementation((c) => ((stderr += String(c)), true));
  try {
    const config = loadConfig({ TOOLGATE_DATA_DIR: dir, ...env });
    const code = await runSecret(argv, config, createLogger('silent', 'test', 'json'), Readable.from([Buffer.from(stdin)]));
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

describe('toolgate secret', () => {
  it('sets from stdin and from a file, lists without values, removes, rotates', async () => {
    const env = { TOOLGATE_SECRETS_KEY: KEY };
    const set = await cli(
      env,
      ['set', '--id', 'alice', '--name', 'GH_TOKEN', '--host', 'api.github.test', '--header', 'Authorization: Bearer {value}'],
      VALUE + '\n',
    );
    expect(set).toMatchObject({ code: 0 });
    expect(set.stdout).toContain('{{secret:GH_TOKEN}}');
    await fs.writeFile(path.join(dir, 'v'), VALUE + 'x');
    expect((await cli(env, ['set', '--id', 'alice', '--name', 'NPM', '--host', 'registry.npm.test', '--value-file', path.join(dir, 'v')])).code).toBe(0);
    const list = await cli(env, ['list', '--id', 'alice']);
    expect(list.stdout).toMatch(/^GH_TOKEN\thost=api\.github\.test\theader=Authorization: Bearer \{value\}\tset=.*\nNPM\thost=registry\.npm\.test\tset=/);
    expect(list.stdout + set.stdout).not.toContain(VALUE);
    const store = createSecretStore(fileSecretBackend(dir), KEY);
    expect((await store.open('alice')).map((s) => s.value)).toEqual([VALUE, VALUE + 'x']);
    expect((await cli(env, ['rm', '--id', 'alice', '--name', 'NPM'])).stdout).toContain('removed');
    const rotated = await cli({ TOOLGATE_SECRETS_KEY: OTHER, TOOLGATE_SECRETS_KEY_OLD: KEY }, ['rotate-key']);
    expect(rotated.stdout).toContain('rotated: 1 secret(s)');
    expect((await cli({ TOOLGATE_SECRETS_KEY: OTHER }, ['list', '--id', 'alice'])).stdout).toContain('GH_TOKEN');
  });

  it('refuses without a key or with a wrong one, with a sentence and exit 1; a value is never taken from argv', async () => {
    const none = await cli({}, ['list', '--id', 'alice']);
    expect(none).toMatchObject({ code: 1, stdout: '' });
    expect(none.stderr).toContain('secrets are off: TOOLGATE_SECRETS_KEY is not set');
    await cli({ TOOLGATE_SECRETS_KEY: KEY }, ['set', '--id', 'a', '--name', 'T', '--host', 'a.test'], VALUE);
    const wrong = await cli({ TOOLGATE_SECRETS_KEY: OTHER }, ['set', '--id', 'a', '--name', 'T', '--host', 'a.test'], VALUE);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('does not open the secret store');
    await expect(cli({ TOOLGATE_SECRETS_KEY: KEY }, ['set', '--id', 'a', '--name', 'T', '--host', 'a.test', '--value', VALUE])).rejects.toThrow(UsageError);
  });
});
