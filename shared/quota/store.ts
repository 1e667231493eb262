/**
 * Per-identity counters shared by every gateway and executor: a per-minute budget and leases
 * (calls in flight, jobs admitted to the bus, live processes; any other count of things in use
 * per identity fits the same lease). Two twins pass one contract suite
 * (test/contracts/quota-store.suite.ts): in memory (`memory.ts`, one process: embedded `serve`)
 * and on Redis (`redis.ts`, every gateway of a cluster, each operation atomic).
 *
 * The per-minute budget is rate-limiter-flexible's fixed window (its Memory and Redis limiters
 * are this twin pair). Leases are ours: rate-limiter-flexible's counters expire per key, not per
 * holder, so a gateway that dies would hold its slots until the window ends, and a window that
 * ends under running calls would free slots that are still in use.
 */

export interface BudgetVerdict {
  allowed: boolean;
  /** When refused: how long until the window has room again. */
  retryAfterMs: number;
}

/** One held unit of a counted resource. `release` is idempotent and never throws. */
export interface Lease {
  release(): Promise<void>;
}

export interface QuotaStore {
  /** Spends one unit of `key`'s budget of `perMinute` units per minute (fixed one-minute windows). */
  spend(key: string, perMinute: number): Promise<BudgetVerdict>;
  /**
   * A lease under `key` when fewer than `max` are held (by every process sharing the store);
   * undefined when all are held. The store keeps held leases alive; if their holder dies they
   * lapse within the lease lifetime (Redis) — in memory they die with the process anyway.
   */
  lease(key: string, max: number): Promise<Lease | undefined>;
  /** Leases held under `key` now. */
  held(key: string): Promise<number>;
  /**
   * What a tools/call takes when it enters, in one atomic step (on Redis one round trip instead of
   * three): see `Entry`.
   */
  enter(entry: Entry): Promise<EntryVerdict>;
  /**
   * `listener(key)` runs when a lease under `key` is released by any process sharing the store
   * (a hint for waiters to try again: it may be missed, so waiters also poll).
   */
  onRelease(listener: (key: string) => void): () => void;
  /** Releases every lease this store holds and closes its connections. */
  close(): Promise<void>;
}

/**
 * A call's counters, taken in this order: a lease under `lease` (refused when `max` are held);
 * then one unit of `budget` (refused past `perMinute`, and the lease is then not taken); then,
 * when given, a lease under `extra` if one is free (none free is no refusal: the call waits for
 * it elsewhere). Exactly as `lease`, `spend`, `lease` one after the other would, undoing the
 * first when the second refuses.
 */
export interface Entry {
  lease: { key: string; max: number };
  budget: { key: string; perMinute: number };
  extra?: { key: string; max: number };
}

export type EntryVerdict =
  { allowed: true; lease: Lease; extra?: Lease } | { allowed: false; refused: 'lease' } | { allowed: false; refused: 'budget'; retryAfterMs: number };

/** `enter` as its three steps, for a store whose steps cost no round trip (memory). */
export async function enterInSteps(store: Pick<QuotaStore, 'lease' | 'spend'>, entry: Entry): Promise<EntryVerdict> {
  const lease = await store.lease(entry.lease.key, entry.lease.max);
  if (!lease) return { allowed: false, refused: 'lease' };
  try {
    const verdict = await store.spend(entry.budget.key, entry.budget.perMinute);
    if (!verdict.allowed) {
      await lease.release();
      return { allowed: false, refused: 'budget', retryAfterMs: verdict.retryAfterMs };
    }
    const extra = entry.extra && (await store.lease(entry.extra.key, entry.extra.max));
    return extra ? { allowed: true, lease, extra } : { allowed: true, lease };
  } catch (err) {
    await lease.release();
    throw err;
  }
}

/** Thrown when the store cannot answer (Redis unreachable): the caller answers Unavailable. */
export class QuotaStoreDown extends Error {
  override readonly name = 'QuotaStoreDown';
}

/** The names of the counters, so every user spells them alike. */
export const quotaKey = {
  /** tools/call running (or waiting) at the gateway, per identity. */
  calls: (tenant: string) => `calls:${tenant}`,
  /** Jobs admitted to the bus (queued or running on an executor), per identity. */
  admitted: (tenant: string) => `admitted:${tenant}`,
  /** Live processes (run_command running, start_process not yet ended) on every executor, per identity. */
  processes: (tenant: string) => `processes:${tenant}`,
} as const;
