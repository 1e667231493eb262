/**
 * Fault: shards spread over the live executors. Real processes: redis-server, `toolgate serve`
 * and `toolgate executor`s on bwrap, TOOLGATE_SHARDS=4, every executor a candidate for all.
 * Two executors serve two shards each; a third joins and gets one handed over (2/1/1) while
 * calls run through the hand-over, none failed; one SIGKILLed, the survivors take its shards
 * within the lease and a third.
 *
 * Which executor answered: each executor has a data directory of its own that carries one
 * data-dir id (as one shared volume would, so shards may be handed between them), and each call's
 * command writes its id and start and end times into the workspace: the directory the line lands
 * in names the executor that ran it. A sampler reads the four lease keys all along. Never two
 * serving executors: every call ran once, and throughout its run its shard's lease named the
 * executor that ran it.
 */
import { promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Redis from 'ioredis';
import { shardOf } from '../../shared/bus/redis-wire';
import { shardLeaseKey } from '../../shared/bus/shard-leases';
import { workspaceName } from '../../executor/tenant-names';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import type { Service } from '../../bench/lib/services';
import { Answer, eventually, FaultStack, note, resultOf, sleep } from './stack';

jest.setTimeout(120_000);

const LEASE_MS = 2000;
const SHARDS = [0, 1, 2, 3];
const ENV = {
  TOOLGATE_SHARDS: String(SHARDS.length),
  TOOLGATE_SHARD_LEASE_MS: String(LEASE_MS),
  TOOLGATE_EXECUTOR_SHARDS: 'all',
  TOOLGATE_WORKSPACE_QUOTA_BYTES: '0',
  TOOLGATE_TENANT_CONCURRENCY: '8',
};
const KEYS = SHARDS.map((s) => shardLeaseKey('toolgate:', s));

/** One tenant per shard. */
const TENANTS = SHARDS.map((shard) => {
  for (let i = 0; ; i++) if (shardOf(`spread-${i}`, SHARDS.length) === shard) return `spread-${i}`;
});

/** The lease holders of the four shards, read at some moment between `from` and `to` (epoch ms). */
interface Sample {
  from: number;
  to: number;
  holders: Array<string | undefined>;
}

/** A call's line: which executor ran it, when (epoch ms, the sandbox's clock: this machine's). */
interface Ran {
  id: string;
  executor: string;
  start: number;
  end: number;
}

describeIf(
  hasCommand('bwrap') && isRoot,
  'needs bubblewrap and root (several identities need a separating sandbox)',
  'fault: shards spread over executors',
  () => {
    describeRedis('four shards, two then three executors, one killed', () => {
      let redis: TestRedis;
      let admin: Redis;
      let stack: FaultStack | undefined;
      const dirs = new Map<string, string>();
      const samples: Sample[] = [];
      let sampling = false;

      beforeAll(async () => {
        redis = await startRedis();
        admin = new Redis(redis.url);
      });
      afterAll(async () => {
        sampling = false;
        await stack?.close();
        for (const d of dirs.values()) await fs.rm(d, { recursive: true, force: true });
        admin?.disconnect();
        await redis?.close();
      });

      async function sampler(): Promise<void> {
        sampling = true;
        while (sampling) {
          const from = Date.now();
          const values = await admin.mget(KEYS).catch(() => undefined);
          if (values) samples.push({ from, to: Date.now(), holders: values.map((v) => v?.split(' ')[0]) });
          await sleep(20);
        }
      }

      const latest = () => samples[samples.length - 1]?.holders ?? [];
      const counts = (holders: Array<string | undefined>) =>
        holders.reduce<Record<string, number>>((m, h) => ({ ...m, [h ?? 'none']: (m[h ?? 'none'] ?? 0) + 1 }), {});
      const shape = (holders: Array<string | undefined>) =>
        Object.values(counts(holders))
          .sort((a, b) => b - a)
          .join('/');

      /** Starts executor fault-<n> on a data directory of its own carrying the shared data-dir id. */
      async function executor(s: FaultStack, id: string): Promise<Service> {
        const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-spread-')));
        await fs.chmod(dir, 0o711);
        await fs.writeFile(path.join(dir, 'data-dir-id'), 'one-shared-volume\n');
        dirs.set(id, dir);
        return s.startExecutor({ TOOLGATE_DATA_DIR: dir, TOOLGATE_EXECUTOR_ID: id });
      }

      /** Every call's line, from every executor's directory. */
      function ranLines(): Ran[] {
        const lines: Ran[] = [];
        for (const [executor, dir] of dirs)
          for (const tenant of TENANTS) {
            let text = '';
            try {
              text = readFileSync(path.join(dir, 'workspaces', workspaceName(tenant!), 'served.log'), 'utf8');
            } catch {
              continue;
            }
            for (const line of text.split('\n').filter(Boolean)) {
              const [id, start, end] = line.split(' ');
              lines.push({ id: id!, executor, start: Number(start), end: Number(end) });
            }
          }
        return lines;
      }

      function call(s: FaultStack, tenant: string, id: string, sleepS: number): Promise<Answer> {
        const command = `s=$(date +%s%3N); sleep ${sleepS}; echo "${id} $s $(date +%s%3N)" >> served.log; echo ${id}`;
        return s.call(s.token(tenant), 'run_command', { command }, { id, timeoutMs: 30_000 });
      }

      it('2/2, then 2/1/1 with no call failed through the hand-over, then the survivors of a SIGKILL take its shards in time; never two owners', async () => {
        stack = await FaultStack.start({ redis, executors: 0, gateway: false, sandbox: 'bwrap', env: ENV });
        const s = stack;
        void sampler();
        const services = new Map<string, Service>();
        for (const id of ['spread-a', 'spread-b']) services.set(id, await executor(s, id));
        await s.startGateway();
        await eventually(() => shape(latest()) === '2/2' && !latest().includes(undefined), 'two shards each on two executors', LEASE_MS * 4);

        // Calls of every shard's tenant, two callers each, through the third executor's arrival.
        const answers: Array<Promise<Answer>> = [];
        let loading = true;
        const loops = TENANTS.flatMap((tenant, t) =>
          [0, 1].map(async (k) => {
            for (let n = 0; loading; n++) {
              const answer = call(s, tenant!, `c${t}-${k}-${n}`, 0.3);
              answers.push(answer);
              await answer;
            }
          }),
        );
        await sleep(1000);
        const joinedAt = Date.now();
        services.set('spread-c', await executor(s, 'spread-c'));
        await eventually(() => counts(latest())['spread-c'] === 1 && shape(latest()) === '2/1/1', 'a 2/1/1 spread', LEASE_MS * 4);
        const spreadMs = Date.now() - joinedAt;
        await sleep(1500);
        loading = false;
        await Promise.all(loops);
        const all = await Promise.all(answers);
        all.forEach((a) => expect(resultOf(a)).toMatchObject({ exitCode: 0 }));
        const handedOver = [...s.executors.map((e) => e.stderr())].join('\n').match(/shard handed over/g)?.length ?? 0;
        expect(handedOver).toBeGreaterThanOrEqual(1);
        // Stable: the same holders a lease later.
        const settled = latest().join();
        await sleep(LEASE_MS);
        expect(latest().join()).toBe(settled);

        // SIGKILL an executor holding two shards, no call running: the survivors take them.
        const victim = Object.entries(counts(latest())).find(([, n]) => n === 2)![0];
        const survivors = [...services.keys()].filter((e) => e !== victim);
        const killedAt = Date.now();
        await s.kill(services.get(victim)!, 'SIGKILL');
        await eventually(
          () => latest().every((h) => h !== undefined && survivors.includes(h)) && shape(latest()) === '2/2',
          "the survivors to take the dead executor's shards",
          LEASE_MS * 4,
        );
        const takeoverMs = Date.now() - killedAt;
        expect(takeoverMs).toBeLessThan(LEASE_MS + LEASE_MS / 3 + 1500);
        const after = await Promise.all(TENANTS.map((tenant, t) => call(s, tenant!, `after-${t}`, 0)));
        after.forEach((a) => expect(resultOf(a)).toMatchObject({ exitCode: 0 }));
        sampling = false;

        // Every call ran exactly once, on the executor that held its shard's lease all through its run.
        const ran = ranLines();
        expect(ran).toHaveLength(all.length + after.length);
        expect(new Set(ran.map((r) => r.id)).size).toBe(ran.length);
        let checked = 0;
        for (const r of ran) {
          const shard = shardOf(TENANTS[Number(/^(?:c|after-)(\d+)/.exec(r.id)![1])]!, SHARDS.length);
          for (const sample of samples) {
            if (sample.from < r.start + 5 || sample.to > r.end - 5) continue;
            expect({ call: r.id, holder: sample.holders[shard] }).toEqual({ call: r.id, holder: r.executor });
            checked++;
          }
        }
        expect(checked).toBeGreaterThan(ran.length);
        const servedBy = counts(ran.map((r) => r.executor));
        note(
          'shard spread (4 shards)',
          `2/2 on two executors; a third joined: 2/1/1 ${spreadMs} ms after it was ready, ${all.length} calls through the hand-over, none failed (ran on ${JSON.stringify(servedBy)}); SIGKILL of one holding 2: survivors held all 4 (2/2) ${takeoverMs} ms after the kill (lease ${LEASE_MS} ms)`,
        );
      });
    });
  },
);
