/**
 * Shard leases on a real Redis: one holder per shard; a standby takes a shard over once its
 * holder stops renewing (within the lease and a third), at once after a release; a lease lost
 * (another holds it) and a lease Redis forgot (restarted empty, FLUSHALL) are told apart.
 */
import Redis from 'ioredis';
import { ShardLeases, shardLeaseKey } from '../../shared/bus/shard-leases';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { eventually, log } from './harness';

jest.setTimeout(30_000);

const LEASE_MS = 600;

describeRedis('shard leases', () => {
  let redis: TestRedis;
  let admin: Redis;
  const opened: ShardLeases[] = [];
  const clients: Redis[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
  });
  afterEach(async () => {
    for (const l of opened.splice(0)) l.stop();
    for (const c of clients.splice(0)) c.disconnect();
    await admin.flushall();
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.close();
  });

  function candidate(owner: string, shards = [0, 1]) {
    const client = new Redis(redis.url);
    clients.push(client);
    const events: string[] = [];
    const leases = new ShardLeases({
      client,
      prefix: 'toolgate:',
      owner,
      shards,
      leaseMs: LEASE_MS,
      log,
      onGained: (s) => events.push(`+${s}`),
      onLost: (s) => events.push(`-${s}`),
    });
    opened.push(leases);
    return { leases, events, client };
  }

  it('gives each shard to one candidate; a standby takes over within the lease once the holder stops renewing', async () => {
    const a = candidate('a');
    await a.leases.start();
    const b = candidate('b');
    await b.leases.start();
    expect(a.leases.shards).toEqual([0, 1]);
    expect(b.leases.shards).toEqual([]);
    expect(await admin.get(shardLeaseKey('toolgate:', 0))).toMatch(/^a /);

    // Renewed: still a's after several leases.
    await new Promise((r) => setTimeout(r, LEASE_MS * 3));
    expect(b.events).toEqual([]);

    // a dies (stops renewing, releases nothing).
    const diedAt = Date.now();
    a.leases.stop();
    await eventually(async () => b.leases.shards.length === 2, 'the standby to take both shards', 5000);
    expect(Date.now() - diedAt).toBeLessThanOrEqual(LEASE_MS + LEASE_MS / 3 + 250);
    expect(b.events.sort()).toEqual(['+0', '+1']);
  });

  it('hands the shards over at the standby next try after a release', async () => {
    const a = candidate('a');
    await a.leases.start();
    const b = candidate('b');
    await b.leases.start();
    const releasedAt = Date.now();
    await a.leases.release();
    expect(await admin.exists(shardLeaseKey('toolgate:', 0))).toBe(0);
    await eventually(async () => b.leases.shards.length === 2, 'the standby to take both shards', 5000);
    expect(Date.now() - releasedAt).toBeLessThanOrEqual(LEASE_MS / 3 + 250);
  });

  it('retakes a lease Redis forgot; gives up one another candidate holds', async () => {
    const a = candidate('a', [0]);
    await a.leases.start();
    await admin.flushall();
    await new Promise((r) => setTimeout(r, LEASE_MS));
    expect(a.events).toEqual(['+0']);
    expect(await admin.get(shardLeaseKey('toolgate:', 0))).toMatch(/^a /);

    // Another took it (as after a partition longer than the lease): a stops serving it.
    await admin.set(shardLeaseKey('toolgate:', 0), 'b token', 'PX', 60_000);
    await eventually(async () => a.events.includes('-0'), 'the holder to notice its loss', 5000);
    expect(a.leases.shards).toEqual([]);
    // Its release leaves the other's lease alone.
    await a.leases.release();
    expect(await admin.get(shardLeaseKey('toolgate:', 0))).toBe('b token');
  });
});
