/**
 * Per-tenant egress policies in both stores (the data directory and a real Redis), the lookup
 * the proxy makes per connection (a tenant's policy replaces the default; unreadable rules
 * refuse everything), and `toolgate egress set|show|clear` on each store.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runEgress } from '../../bin/commands/egress';
import { UsageError } from '../../bin/flags';
import { createEgressPolicy } from '../../executor/egress/policy';
import { EGRESS_POLICY_FILE, EgressPolicyStore, filePolicyStore, policyLookup, redisPolicyStore } from '../../executor/egress/policy-store';
import { closeConnection, failFastConnection, waitReady } from '../../shared/bus/redis-connections';
import { loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/log';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';

let dir: string;
beforeEach(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-egress-store-'));
});
afterEach(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

const NOW = new Date('2026-11-26T12:00:00Z');

function contract(name: string, make: () => Promise<EgressPolicyStore>): void {
  describe(name, () => {
    it('sets, gets and clears a tenant, spelling rules one way and refusing bad ones by name', async () => {
      const store = await make();
      expect(await store.get('alice')).toBeUndefined();
      expect(await store.set('alice', { allow: ' github.com, *.github.com ', deny: 'gist.github.com' })).toEqual({
        allow: 'github.com,*.github.com',
        deny: 'gist.github.com',
        updatedAt: NOW.toISOString(),
      });
      expect(await store.get('alice')).toMatchObject({ allow: 'github.com,*.github.com', deny: 'gist.github.com' });
      expect(await store.get('bob')).toBeUndefined();
      await expect(store.set('alice', { allow: 'ok.example,bad..example' })).rejects.toThrow('--allow: "bad..example" is not a valid rule');
      expect(await store.get('alice')).toMatchObject({ allow: 'github.com,*.github.com' });
      expect(await store.clear('alice')).toBe(true);
      expect(await store.clear('alice')).toBe(false);
      expect(await store.get('alice')).toBeUndefined();
    });

    it('keeps odd tenant names apart', async () => {
      const store = await make();
      await store.set('__proto__', { allow: 'a.example' });
      await store.set('x y/z', { allow: 'b.example' });
      expect(await store.get('__proto__')).toMatchObject({ allow: 'a.example' });
      expect(await store.get('x y/z')).toMatchObject({ allow: 'b.example' });
      expect(await store.get('constructor')).toBeUndefined();
    });

    it("the lookup: a tenant's own policy replaces the default, deny included; clearing restores it", async () => {
      const store = await make();
      const lookup = policyLookup(store, createEgressPolicy({ allow: 'registry.npmjs.org', deny: 'evil.example' }));
      expect((await lookup('alice')).source).toBe('default');
      expect((await lookup('alice')).policy.decide({ host: 'registry.npmjs.org', port: 443 }).allowed).toBe(true);
      await store.set('alice', { allow: 'github.com,evil.example' });
      const own = await lookup('alice');
      expect(own.source).toBe('tenant');
      expect(own.policy.decide({ host: 'registry.npmjs.org', port: 443 }).allowed).toBe(false);
      expect(own.policy.decide({ host: 'evil.example', port: 443 }).allowed).toBe(true);
      expect((await lookup('bob')).policy.decide({ host: 'github.com', port: 443 }).allowed).toBe(false);
      await store.clear('alice');
      expect((await lookup('alice')).source).toBe('default');
    });
  });
}

contract('file store', async () => filePolicyStore(path.join(dir, 'data'), () => NOW));

describe('file store on disk', () => {
  it('writes one JSON file atomically, leaving no temporary files, and fails closed on rules that no longer parse', async () => {
    const data = path.join(dir, 'data');
    const store = filePolicyStore(data, () => NOW);
    await Promise.all(['a', 'b', 'c', 'd'].map((t) => store.set(t, { allow: `${t}.example` })));
    expect(await fs.readdir(data)).toEqual([EGRESS_POLICY_FILE]);
    const file = JSON.parse(await fs.readFile(path.join(data, EGRESS_POLICY_FILE), 'utf8')) as Record<string, unknown>;
    expect(Object.keys(file).sort()).toEqual(['a', 'b', 'c', 'd']);
    file.a = { allow: 'x..y', deny: '' };
    await fs.writeFile(path.join(data, EGRESS_POLICY_FILE), JSON.stringify(file));
    const found = await policyLookup(store, createEgressPolicy({ allow: 'a.example' }))('a');
    expect(found.source).toBe('unreadable');
    expect(found.policy.decide({ host: 'a.example', port: 443 }).allowed).toBe(false);
  });
});

describeRedis('Redis store', () => {
  let redis: TestRedis;
  let client: ReturnType<typeof failFastConnection>;
  beforeAll(async () => {
    redis = await startRedis();
    client = failFastConnection(redis.config, 'egress-test');
    await waitReady(client, redis.config, 5000);
  });
  afterAll(async () => {
    await closeConnection(client);
    await redis.close();
  });
  beforeEach(async () => {
    await client.flushall();
  });

  contract('contract', async () => redisPolicyStore(client, () => NOW));

  it('keeps one key per tenant', async () => {
    await redisPolicyStore(client, () => NOW).set('alice', { allow: 'github.com' });
    expect(await client.keys('*')).toEqual(['toolgate:egress:policy:alice']);
  });

  it('toolgate egress set/show/clear on Redis when TOOLGATE_REDIS_URL is set', async () => {
    const config = loadConfig({ TOOLGATE_REDIS_URL: redis.url, TOOLGATE_DATA_DIR: dir });
    const out = await cli(config, ['set', '--id', 'alice', '--allow', 'github.com']);
    expect(out.stdout).toContain('allow: github.com');
    expect(await client.get('toolgate:egress:policy:alice')).toContain('github.com');
    expect((await cli(config, ['show', '--id', 'alice'])).stdout).toBe('allow: github.com\ndeny: \n');
    await cli(config, ['clear', '--id', 'alice']);
    expect(await client.exists('toolgate:egress:policy:alice')).toBe(0);
  });
});

/** Runs `toolgate egress …` in process, capturing stdout and stderr. */
async function cli(config: ReturnType<typeof loadConfig>, argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const out = jest.spyOn(process.stdout, 'write').mockImplementation((c) => ((stdout += String(c)), true));
  const err = jest.spyOn(process.stderr, 'write').mockImplementation((c) => ((stderr += String(c)), true));
  try {
    const code = await runEgress(argv, config, createLogger('silent', 'test', 'json'));
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

describe('toolgate egress (data directory)', () => {
  it('shows the default with a note, sets a replacing policy, shows it, clears it', async () => {
    const config = loadConfig({ TOOLGATE_DATA_DIR: dir, TOOLGATE_EGRESS_ALLOW: 'registry.npmjs.org' });
    const before = await cli(config, ['show', '--id', 'alice']);
    expect(before.stdout).toBe('allow: registry.npmjs.org\ndeny: \n');
    expect(before.stderr).toContain('has no policy of its own: the default applies');
    const set = await cli(config, ['set', '--id', 'alice', '--allow', 'github.com,*.github.com', '--deny', 'gist.github.com']);
    expect(set.code).toBe(0);
    expect(set.stdout).toContain('replacing the default');
    expect((await cli(config, ['show', '--id', 'alice'])).stdout).toBe('allow: github.com,*.github.com\ndeny: gist.github.com\n');
    expect((await cli(config, ['clear', '--id', 'alice'])).stdout).toContain('follows the default egress policy again');
    expect((await cli(config, ['show', '--id', 'alice'])).stdout).toBe('allow: registry.npmjs.org\ndeny: \n');
  });

  it('--allow none gives a tenant no egress at all', async () => {
    const config = loadConfig({ TOOLGATE_DATA_DIR: dir, TOOLGATE_EGRESS_ALLOW: 'registry.npmjs.org' });
    expect((await cli(config, ['set', '--id', 'alice', '--allow', 'none'])).stdout).toContain('allow: (none: no egress)');
    expect((await cli(config, ['show', '--id', 'alice'])).stdout).toBe('allow: \ndeny: \n');
  });

  it('refuses bad usage and bad rules with a usage error naming them', async () => {
    const config = loadConfig({ TOOLGATE_DATA_DIR: dir });
    await expect(cli(config, [])).rejects.toThrow(UsageError);
    await expect(cli(config, ['show'])).rejects.toThrow('--id is required');
    await expect(cli(config, ['set', '--id', 'alice'])).rejects.toThrow('--allow is required');
    await expect(cli(config, ['show', '--id', 'alice', '--allow', 'x'])).rejects.toThrow('unknown option --allow');
    await expect(cli(config, ['set', '--id', 'alice', '--allow', 'a.example', '--deny', '*.'])).rejects.toThrow('--deny: "*." is not a valid rule');
  });
});
