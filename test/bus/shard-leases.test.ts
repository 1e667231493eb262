/**
 * Shard leases on a real Redis: one holder per shard; a standby takes a shard over once its
 * holder stops renewing (within the lease and a third), at once after a release; a lease lost
 * (another holds it) and a lease Redis forgot (restarted empty, FLUSHALL) are told apart. Shards
 * spread over the live candidates: a newcomer gets its share handed over (the lease kept until
 * the hand-over's worker closed), and a dead one's shares go to the survivors.
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

  /** A candidate; its hand-overs wait for `drain` (a worker whose running jobs finish), if given; `busy` says a shard's calls run. */
  function candidate(owner: string, shards = [0, 1], drain?: () => Promise<void>, busy?: (shard: number) => boolean) {
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
      onHandOver: async (s) => {
        events.push(`>${s}`);
        await drain?.();
      },
      onHandOverAborted: (s) => events.push(`!${s}`),
      ...(busy ? { busy } : {}),
    });
    opened.push(leases);
    return { leases, events, client };
  }

  const holders = async (shards: number[]) => Promise.all(shards.map(async (s) => (await admin.get(shardLeaseKey('toolgate:', s)))?.split(' ')[0]));

  it('gives each shard to one candidate; a standby takes over within the lease once the holder stops renewing', async () => {
    // One shard, two candidates: the second stands by (its fair share is none).
    const a = candidate('a', [0]);
    await a.leases.start();
    const b = candidate('b', [0]);
    await b.leases.start();
    expect(a.leases.shards).toEqual([0]);
    expect(b.leases.shards).toEqual([]);
    expect(await admin.get(shardLeaseKey('toolgate:', 0))).toMatch(/^a /);

    // Renewed: still a's after several leases.
    await new Promise((r) => setTimeout(r, LEASE_MS * 3));
    expect(b.events).toEqual([]);

    // a dies (stops renewing, releases nothing).
    const diedAt = Date.now();
    a.leases.stop();
    await eventually(async () => b.leases.shards.length === 1, 'the standby to take the shard', 5000);
    expect(Date.now() - diedAt).toBeLessThanOrEqual(LEASE_MS + LEASE_MS / 3 + 250);
    expect(b.events).toEqual(['+0']);
  });

  it('hands the shards over at the standby next try after a release', async () => {
    const a = candidate('a', [0]);
    await a.leases.start();
    const b = candidate('b', [0]);
    await b.leases.start();
    const releasedAt = Date.now();
    await a.leases.release();
    expect(await admin.exists(shardLeaseKey('toolgate:', 0))).toBe(0);
    await eventually(async () => b.leases.shards.length === 1, 'the standby to take the shard', 5000);
    expect(Date.now() - releasedAt).toBeLessThanOrEqual(LEASE_MS / 3 + 250);
  });

  it("spreads four shards: 2/2, a newcomer gets its share handed over (2/1/1), a dead one's shards go to the survivors", async () => {
    const ALL = [0, 1, 2, 3];
    let finishDrain: () => void = () => undefined;
    const draining = new Promise<void>((r) => (finishDrain = r));
    const a = candidate('a', ALL, () => draining);
    await a.leases.start();
    expect(a.leases.shards).toEqual(ALL);
    const b = candidate('b', ALL);
    await b.leases.start();
    // a hands two over, but keeps their leases (renewed) until its workers for them closed.
    await eventually(async () => a.events.filter((e) => e.startsWith('>')).length === 2, 'a to hand two shards over', 5000);
    await new Promise((r) => setTimeout(r, LEASE_MS * 2));
    expect(await holders(ALL)).toEqual(['a', 'a', 'a', 'a']);
    expect(b.leases.shards).toEqual([]);
    finishDrain();
    await eventually(async () => b.leases.shards.length === 2, 'b to take its share', 5000);
    expect(a.leases.shards).toHaveLength(2);

    const c = candidate('c', ALL);
    await c.leases.start();
    await eventually(async () => c.leases.shards.length === 1, 'c to get one shard', 5000);
    const counts = async () => (await holders(ALL)).reduce<Record<string, number>>((m, h) => ({ ...m, [h ?? '-']: (m[h ?? '-'] ?? 0) + 1 }), {});
    expect(await counts()).toEqual({ a: 2, b: 1, c: 1 });
    // Stable: nothing moves over several leases.
    const before = [...a.events, '|', ...b.events, '|', ...c.events];
    await new Promise((r) => setTimeout(r, LEASE_MS * 3));
    expect([...a.events, '|', ...b.events, '|', ...c.events]).toEqual(before);

    // a dies (stops renewing): b and c take its two within the lease and a third.
    const diedAt = Date.now();
    a.leases.stop();
    await eventually(async () => b.leases.shards.length + c.leases.shards.length === 4, "the survivors to take a's shards", 5000);
    expect(Date.now() - diedAt).toBeLessThanOrEqual(LEASE_MS + LEASE_MS / 3 + 250);
    expect(await counts()).toEqual({ b: 2, c: 2 });
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

  it('gives a hand-over up when its drain outlasts a lease (a long call), serves the shard on, and hands it over once idle', async () => {
    let busy = true;
    // While the long call runs its worker does not close; once idle, a drain ends at once.
    const drain = () => (busy ? new Promise<void>(() => undefined) : Promise.resolve());
    const a = candidate('a', [0, 1], drain, () => busy);
    await a.leases.start();
    expect(await holders([0, 1])).toEqual(['a', 'a']);
    const b = candidate('b', [0, 1]);
    await b.leases.start();
    // a hands one shard over; its drain does not end within a lease: given up, the shard served again.
    await eventually(async () => a.events.some((e) => e.startsWith('!')), 'the hand-over to be given up', LEASE_MS * 6);
    const shard = Number(a.events.find((e) => e.startsWith('!'))!.slice(1));
    expect(await holders([shard])).toEqual(['a']);
    // While its calls run, no second attempt; once idle, it goes (this drain ends at once).
    const attempts = () => a.events.filter((e) => e === `>${shard}`).length;
    const before = attempts();
    await new Promise((r) => setTimeout(r, LEASE_MS * 2));
    expect(attempts()).toBe(before);
    busy = false;
    await eventually(async () => (await holders([0, 1])).sort().join() === 'a,b', 'one shard each', LEASE_MS * 8);
  });
});
