/**
 * How many shards one executor should serve, and which to take or hand over, from one look at
 * Redis: the live executors (live-executors.ts) and who holds each lease. No I/O, so every rule
 * is tested by itself (test/bus/shard-share.test.ts).
 *
 * Fair share: `n` shards (those any live executor is a candidate for) over `k` live executors,
 * floor(n / k) each and one more for the first n % k of them, ranked by how many they hold now
 * (most first, then by id). Ranking by holdings makes a newcomer's share come out of the fullest
 * executors, so one arrival moves as few shards as it can; every executor computes the same
 * ranking from the same look.
 *
 * - A free shard is taken while under the share. Beyond it only when no other live candidate
 *   for it is under its share (executors that are candidates for different shards): a shard is
 *   never left unserved while someone could serve it.
 * - Shards beyond the share are handed over only to a live candidate under its share whose data
 *   directory is this one's: a hand-over moves a tenant between executors, and with a data
 *   directory of its own the receiver could not reach the tenant's workspace. Executors on their
 *   own data directories therefore spread only as shards come free (start-up, failover).
 */
import type { LiveExecutor } from './live-executors';

export interface ShareView {
  self: LiveExecutor;
  /** Every live executor, this one included. */
  live: readonly LiveExecutor[];
  /** The executor id holding each held shard's lease; a shard missing is free. */
  holders: ReadonlyMap<number, string>;
  /** This executor's leases (its own record, fresher than `holders`). */
  held: ReadonlySet<number>;
  /** Of `held`, those being handed over already (the worker closing; the lease still ours). */
  handing: ReadonlySet<number>;
}

export interface SharePlan {
  /** This executor's fair share. */
  share: number;
  /** Free shards to try in this order, keeping at most `room` of them. */
  wanted: number[];
  room: number;
  /** Free shards no one else under its share could take: to take whatever the share. */
  orphans: number[];
  /** Shards to hand over. */
  handOver: number[];
}

export function planShare(view: ShareView): SharePlan {
  const { self, live, holders, held, handing } = view;
  const universe = new Set(live.flatMap((e) => e.shards));
  const counts = new Map<string, number>(live.map((e) => [e.id, 0]));
  for (const [shard, owner] of holders) if (universe.has(shard) && counts.has(owner)) counts.set(owner, counts.get(owner)! + 1);
  counts.set(self.id, held.size);
  const count = (e: LiveExecutor) => counts.get(e.id) ?? 0;

  const base = Math.floor(universe.size / live.length);
  const extra = universe.size % live.length;
  const ranked = [...live].sort((a, b) => count(b) - count(a) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const shareOf = new Map(ranked.map((e, i) => [e.id, base + (i < extra ? 1 : 0)]));
  const share = shareOf.get(self.id) ?? base;
  // What each other executor still lacks; a hand-over fills it.
  const lacking = new Map(live.filter((e) => e.id !== self.id).map((e) => [e.id, Math.max(0, (shareOf.get(e.id) ?? 0) - count(e))]));
  const takerFor = (shard: number, sameDataDir: boolean) =>
    live.find((e) => e.id !== self.id && (lacking.get(e.id) ?? 0) > 0 && e.shards.includes(shard) && (!sameDataDir || e.dataDir === self.dataDir));

  const serving = held.size - handing.size;
  const free = self.shards.filter((s) => !holders.has(s) && !held.has(s));
  const room = Math.max(0, share - serving);
  const orphans = free.filter((s) => takerFor(s, false) === undefined);
  const wanted = free.filter((s) => !orphans.includes(s));

  const handOver: number[] = [];
  let excess = serving + orphans.length - share;
  const givable = [...held].filter((s) => !handing.has(s)).sort((a, b) => b - a);
  for (const shard of givable) {
    if (excess <= 0) break;
    const taker = takerFor(shard, true);
    if (!taker) continue;
    lacking.set(taker.id, lacking.get(taker.id)! - 1);
    handOver.push(shard);
    excess--;
  }
  return { share, wanted, room, orphans, handOver };
}
