/** The quota store of one process (embedded `serve`): rate-limiter-flexible's Memory limiter and a Map of leases. */
import { RateLimiterMemory, RateLimiterRes } from './limiters';
import type { BudgetVerdict, Entry, EntryVerdict, Lease, QuotaStore } from './store';
import { enterInSteps } from './store';

export class MemoryQuotaStore implements QuotaStore {
  private readonly budgets = new Map<number, RateLimiterMemory>();
  private readonly leases = new Map<string, Set<object>>();
  private readonly listeners = new Set<(key: string) => void>();

  async spend(key: string, perMinute: number): Promise<BudgetVerdict> {
    let limiter = this.budgets.get(perMinute);
    if (!limiter) this.budgets.set(perMinute, (limiter = new RateLimiterMemory({ points: perMinute, duration: 60 })));
    try {
      await limiter.consume(key, 1);
      return { allowed: true, retryAfterMs: 0 };
    } catch (res) {
      if (res instanceof RateLimiterRes) return { allowed: false, retryAfterMs: Math.max(1, res.msBeforeNext) };
      throw res;
    }
  }

  async lease(key: string, max: number): Promise<Lease | undefined> {
    let held = this.leases.get(key);
    if ((held?.size ?? 0) >= max) return undefined;
    if (!held) this.leases.set(key, (held = new Set()));
    const token = {};
    held.add(token);
    return {
      release: async () => {
        if (!held.delete(token)) return;
        if (held.size === 0 && this.leases.get(key) === held) this.leases.delete(key);
        for (const listener of this.listeners) queueMicrotask(() => listener(key));
      },
    };
  }

  enter(entry: Entry): Promise<EntryVerdict> {
    return enterInSteps(this, entry);
  }

  async held(key: string): Promise<number> {
    return this.leases.get(key)?.size ?? 0;
  }

  onRelease(listener: (key: string) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** Keys with leases held (for tests: memory follows active identities). */
  get trackedKeys(): number {
    return this.leases.size;
  }

  async close(): Promise<void> {
    this.leases.clear();
    this.listeners.clear();
  }
}
