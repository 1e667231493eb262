/**
 * The bus's Redis connections send the commands of one event-loop callback in one socket write
 * (redis-connections.ts `coalesceWrites`), and every command still gets its own answer, in
 * order, on a real Redis — also after a reconnect (a new socket).
 */
import type { Socket } from 'node:net';
import type Redis from 'ioredis';
import { closeConnection, coalesceWrites, failFastConnection, waitReady } from '../../shared/bus/redis-connections';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';

describeRedis('coalesced writes on a bus connection', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.close();
  });

  /** Counts the socket's system-call writes (Node's _write for one chunk, _writev for several). */
  const countWrites = (socket: Socket) => {
    const counted = { n: 0 };
    const s = socket as unknown as { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
    for (const name of ['_write', '_writev'] as const) {
      const original = s[name].bind(socket);
      s[name] = (...args: unknown[]) => {
        counted.n++;
        return original(...args);
      };
    }
    return counted;
  };

  it('sends the commands of one callback in one write, each answered in order', async () => {
    const client = coalesceWrites(failFastConnection(redis.config, 'coalesce-test')) as Redis;
    try {
      await waitReady(client, redis.config, 5000);
      const writes = countWrites(client.stream as Socket);
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => client.echo(`m${i}`)));
      expect(answers).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`));
      expect(writes.n).toBe(1);
      // A command issued from a later callback is not held back for company.
      await new Promise((r) => setTimeout(r, 10));
      expect(await client.echo('alone')).toBe('alone');
      expect(writes.n).toBe(2);
    } finally {
      await closeConnection(client);
    }
  });

  it('keeps coalescing on the new socket after a reconnect', async () => {
    const client = coalesceWrites(failFastConnection(redis.config, 'coalesce-reconnect')) as Redis;
    try {
      await waitReady(client, redis.config, 5000);
      const first = client.stream;
      const back = new Promise((r) => client.once('ready', r));
      client.stream.destroy();
      await back;
      expect(client.stream).not.toBe(first);
      const writes = countWrites(client.stream as Socket);
      expect(await Promise.all([client.echo('a'), client.echo('b'), client.echo('c')])).toEqual(['a', 'b', 'c']);
      expect(writes.n).toBe(1);
    } finally {
      await closeConnection(client);
    }
  });
});
