/**
 * The executor's egress service reads the store `toolgate egress set` writes: the data directory
 * for an embedded serve, Redis when the bus is on Redis. A change is seen by the next lookup
 * (http_request's gate here, the proxy's per-connection lookup in the sandbox suites), and a
 * bad default rule fails start-up naming its variable.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runEgress } from '../../bin/commands/egress';
import { EgressService, startEgressService } from '../../executor/egress/service';
import type { Config } from '../../shared/config';
import { capturedLogger, testConfig } from '../executor/helpers';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';

const log = capturedLogger().log;

async function quietly<T>(work: () => Promise<T>): Promise<T> {
  const quiet = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
  try {
    return await work();
  } finally {
    quiet.mockRestore();
  }
}

/** The live-change contract, for a service and the config `toolgate egress` runs with. */
async function followsTheStore(config: Readonly<Config>, service: EgressService): Promise<void> {
  // No default rules and no policy of its own: egress does not govern http_request for alice.
  expect(await service.gateFor('alice')).toBeUndefined();
  await quietly(() => runEgress(['set', '--id', 'alice', '--allow', 'github.com'], config, log));
  const gate = await service.gateFor('alice');
  expect(gate?.decide({ host: 'github.com', port: 443 })).toEqual({ allowed: true });
  expect(gate?.decide({ host: 'example.com', port: 443 })).toMatchObject({ allowed: false });
  await quietly(() => runEgress(['clear', '--id', 'alice'], config, log));
  expect(await service.gateFor('alice')).toBeUndefined();
}

describe('egress service on the data directory', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-egs-'));
  });
  afterAll(() => fs.rm(dir, { recursive: true, force: true }));

  it('sees `toolgate egress set` and `clear` at the next lookup', async () => {
    const config = testConfig(dir);
    const service = await startEgressService({ config, log, onEvent: () => undefined });
    await followsTheStore(config, service);
    await service.close();
  });

  it('governs every tenant once a default rule is set, and refuses a bad rule at start', async () => {
    const service = await startEgressService({ config: testConfig(dir, { TOOLGATE_EGRESS_ALLOW: 'registry.npmjs.org' }), log, onEvent: () => undefined });
    expect((await service.gateFor('bob'))?.decide({ host: 'registry.npmjs.org', port: 443 })).toEqual({ allowed: true });
    await service.close();
    await expect(startEgressService({ config: testConfig(dir, { TOOLGATE_EGRESS_ALLOW: 'http://x/' }), log, onEvent: () => undefined })).rejects.toThrow(
      /TOOLGATE_EGRESS_ALLOW: "http:\/\/x\/" is not a valid rule/,
    );
  });

  it('refuses a data directory whose sockets would be too long a path', async () => {
    const config = testConfig(path.join(dir, 'x'.repeat(100)));
    await expect(startEgressService({ config, log, onEvent: () => undefined })).rejects.toThrow(/longer than the 107 bytes/);
  });
});

describeRedis('egress service on Redis', () => {
  let redis: TestRedis;
  let dir: string;
  beforeAll(async () => {
    redis = await startRedis();
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-egs-'));
  });
  afterAll(async () => {
    await redis?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('sees `toolgate egress set` and `clear` at the next lookup', async () => {
    const config = testConfig(dir, { TOOLGATE_REDIS_URL: redis.url });
    const service = await startEgressService({ config, log, onEvent: () => undefined });
    await followsTheStore(config, service);
    // Nothing was written to the data directory: the policy lives in Redis.
    expect(await fs.readdir(dir)).toEqual([]);
    await service.close();
  });
});
