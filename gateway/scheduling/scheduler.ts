/**
 * Fair execution: who may put a job on the bus next. Each tenant has at most `perTenant` jobs
 * admitted at once (queued on the bus or running on an executor, counted cluster-wide when the
 * store is on Redis); its further calls wait here, in arrival order, rather than in the bus's
 * queue. So an executor's queue never holds more than `perTenant` jobs of any one tenant: a
 * tenant flooding it with slow commands fills at most `perTenant` of the executor's slots, and
 * another tenant's call is at most `perTenant` jobs per busy tenant behind. With `perTenant` well
 * below an executor's slots (default a quarter), a quiet tenant starts at once.
 *
 * This is decided per tenant, before a job can take a slot, and apart from the shard (which
 * only says which executor holds a tenant's sandbox). Two implementations, one contract suite
 * (test/contracts/scheduler.suite.ts): in-process (one gateway, embedded `serve`) and on Redis
 * (every gateway shares each tenant's count) — both `LeaseScheduler` over a QuotaStore twin.
 */

import type { Lease } from '../../shared/quota/store';

/** A tenant's right to one job on the bus; `release` when the job has ended (idempotent). */
export interface Admission {
  release(): void;
}

export interface Scheduler {
  /**
   * Resolves once `tenant` has fewer than `perTenant` jobs admitted; a tenant's waiting calls are
   * admitted in arrival order. Rejects with the signal's reason when it aborts first (the call
   * was cancelled or its deadline passed), and with a ProtocolError Unavailable when the store
   * cannot be reached.
   */
  admit(tenant: string, signal: AbortSignal): Promise<Admission>;
  /**
   * Where a call of `tenant` may take its admission itself, together with its other counters
   * (one step of the quota store): a lease under this key, of at most `max`. Undefined when calls
   * of `tenant` wait here already (they go first) or the scheduler is closed.
   */
  entryFor(tenant: string): { key: string; max: number } | undefined;
  /** The admission of a lease taken as `entryFor` said. */
  adopt(lease: Lease): Admission;
  /** Calls waiting here for admission (this process), by tenant. */
  waiting(): ReadonlyMap<string, number>;
  close(): Promise<void>;
}
