/**
 * The Scheduler over a QuotaStore: admission is a lease under `admitted:<tenant>` with at most
 * `perTenant` held. Waiting calls queue per tenant in this process; the head of a tenant's queue
 * tries again when a lease of that tenant is released (here at once, elsewhere through the
 * store's release notice) and, in case a notice was missed or a dead gateway's lease lapsed, on a
 * poll every `pollMs` while anyone waits.
 */
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import type { Lease, QuotaStore } from '../../shared/quota/store';
import { quotaKey, QuotaStoreDown } from '../../shared/quota/store';
import type { Admission, Scheduler } from './scheduler';

export interface LeaseSchedulerOptions {
  store: QuotaStore;
  /** Jobs one tenant may have admitted at once. */
  perTenant: number;
  /** How often waiting tenants try again without a release notice (default 500 ms). */
  pollMs?: number;
}

interface Waiter {
  resolve(admission: Admission): void;
  reject(err: unknown): void;
  signal: AbortSignal;
  onAbort(): void;
}

interface Line {
  waiters: Waiter[];
  /** A try is running; `again` asks it to loop once more when it ends. */
  trying: boolean;
  again: boolean;
}

const PREFIX = quotaKey.admitted('');

export class LeaseScheduler implements Scheduler {
  private readonly lines = new Map<string, Line>();
  private readonly unlisten: () => void;
  private poller: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: LeaseSchedulerOptions) {
    if (!(options.perTenant >= 1)) throw new RangeError('perTenant must be at least 1');
    this.unlisten = options.store.onRelease((key) => {
      if (key.startsWith(PREFIX)) this.kick(key.slice(PREFIX.length));
    });
  }

  admit(tenant: string, signal: AbortSignal): Promise<Admission> {
    if (this.closed) return Promise.reject(new ProtocolError(ErrorCode.Unavailable, 'Unavailable: the server is shutting down'));
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<Admission>((resolve, reject) => {
      let line = this.lines.get(tenant);
      if (!line) this.lines.set(tenant, (line = { waiters: [], trying: false, again: false }));
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          this.drop(tenant, waiter);
          reject(signal.reason);
        },
      };
      signal.addEventListener('abort', waiter.onAbort, { once: true });
      line.waiters.push(waiter);
      this.kick(tenant);
      this.poll();
    });
  }

  entryFor(tenant: string): { key: string; max: number } | undefined {
    if (this.closed || this.lines.has(tenant)) return undefined;
    return { key: quotaKey.admitted(tenant), max: this.options.perTenant };
  }

  adopt(lease: Lease): Admission {
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        void lease.release();
      },
    };
  }

  waiting(): ReadonlyMap<string, number> {
    return new Map([...this.lines].map(([tenant, line]) => [tenant, line.waiters.length]));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unlisten();
    clearInterval(this.poller);
    for (const [tenant, line] of this.lines) {
      for (const w of [...line.waiters]) {
        this.drop(tenant, w);
        w.reject(new ProtocolError(ErrorCode.Unavailable, 'Unavailable: the server is shutting down'));
      }
    }
  }

  /** Admits the head of `tenant`'s line for as long as the store grants leases. */
  private kick(tenant: string): void {
    const line = this.lines.get(tenant);
    if (!line) return;
    if (line.trying) {
      line.again = true;
      return;
    }
    line.trying = true;
    void this.tryAdmit(tenant, line).finally(() => {
      line.trying = false;
      if (line.again) {
        line.again = false;
        this.kick(tenant);
      } else if (line.waiters.length === 0 && this.lines.get(tenant) === line) this.lines.delete(tenant);
    });
  }

  private async tryAdmit(tenant: string, line: Line): Promise<void> {
    while (line.waiters.length > 0 && !this.closed) {
      let lease;
      try {
        lease = await this.options.store.lease(quotaKey.admitted(tenant), this.options.perTenant);
      } catch (err) {
        // The store is down: nobody in this line can be admitted now; they hear it at once.
        for (const w of [...line.waiters]) {
          this.drop(tenant, w);
          const why = err instanceof QuotaStoreDown ? err.message : 'the scheduler failed';
          w.reject(new ProtocolError(ErrorCode.Unavailable, `Unavailable: ${why}; try again shortly`));
        }
        return;
      }
      if (!lease) return;
      const waiter = line.waiters.shift();
      if (!waiter) {
        // Everyone left while the lease was being taken.
        void lease.release();
        return;
      }
      waiter.signal.removeEventListener('abort', waiter.onAbort);
      waiter.resolve(this.adopt(lease));
    }
  }

  private drop(tenant: string, waiter: Waiter): void {
    waiter.signal.removeEventListener('abort', waiter.onAbort);
    const line = this.lines.get(tenant);
    if (!line) return;
    const i = line.waiters.indexOf(waiter);
    if (i !== -1) line.waiters.splice(i, 1);
    if (line.waiters.length === 0 && !line.trying) this.lines.delete(tenant);
  }

  /** While anyone waits, every line tries again now and then (missed notices, lapsed leases). */
  private poll(): void {
    if (this.poller) return;
    this.poller = setInterval(() => {
      if (this.lines.size === 0) {
        clearInterval(this.poller);
        this.poller = undefined;
        return;
      }
      for (const tenant of this.lines.keys()) this.kick(tenant);
    }, this.options.pollMs ?? 500);
    this.poller.unref();
  }
}
