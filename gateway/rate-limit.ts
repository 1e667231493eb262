/**
 * Per-identity limits on tools/call: how many may be in flight at once (running or waiting for
 * their tenant's admission), and how many may start per minute (fixed one-minute windows). The
 * counters live in a QuotaStore: in memory for embedded `serve`, on Redis when a Redis bus is
 * configured, so every gateway of a cluster draws on one budget per identity. A refused call is
 * a JSON-RPC error (-32004) whose `data.retryAfterMs` says when to try again; a store that cannot
 * answer (Redis down) refuses with Unavailable. A refusal is answered after a short delay (see
 * `tarpit`), so spinning on a limit costs the gateway little.
 */
import type { Caller } from '../shared/auth/permissions';
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';
import type { Lease, QuotaStore } from '../shared/quota/store';
import { quotaKey, QuotaStoreDown } from '../shared/quota/store';
import type { Scheduler } from './scheduling/scheduler';
import { CallExtras, CallSignal, signalOf, ToolRunner } from '../shared/tools/runner';
import type { AnyTool, ToolResult } from '../shared/tools/tool';

export interface RateLimits {
  /** tools/call in flight at once per identity. */
  maxConcurrent: number;
  /** tools/call started per identity per minute. */
  perMinute: number;
}

/**
 * A concurrency refusal cannot know when a running call will end; this is the hint it gives.
 * Short, because calls are usually quick, and a client backing off exponentially will adapt.
 */
export const CONCURRENCY_RETRY_MS = 250;

export class RateLimiter {
  constructor(
    private readonly limits: RateLimits,
    private readonly store: QuotaStore,
  ) {
    if (!(limits.maxConcurrent > 0) || !(limits.perMinute > 0)) throw new RangeError('rate limits must be positive');
  }

  /** Takes a slot for `tenant` or throws the RateLimited ProtocolError. Call the returned function once, when the call ends. */
  async acquire(tenant: string): Promise<() => void> {
    return (await this.enter(tenant)).release;
  }

  /**
   * `acquire`, taking also a lease under `extra` if one is free (the call's admission to the bus,
   * see Scheduler.entryFor), all in one step of the store: one round trip on Redis.
   */
  async enter(tenant: string, extra?: { key: string; max: number }): Promise<{ release(): void; extra?: Lease }> {
    const key = quotaKey.calls(tenant);
    // The lease first, so a call refused for concurrency spends nothing of the minute's budget.
    const verdict = await guard(
      this.store.enter({ lease: { key, max: this.limits.maxConcurrent }, budget: { key, perMinute: this.limits.perMinute }, ...(extra ? { extra } : {}) }),
    );
    if (verdict.allowed) {
      const { lease } = verdict;
      return { release: () => void lease.release(), ...(verdict.extra ? { extra: verdict.extra } : {}) };
    }
    if (verdict.refused === 'lease') {
      throw new ProtocolError(
        ErrorCode.RateLimited,
        `Rate limited: at most ${this.limits.maxConcurrent} tool calls may run at once per identity; retry after ${CONCURRENCY_RETRY_MS} ms`,
        {
          limit: 'concurrent',
          max: this.limits.maxConcurrent,
          retryAfterMs: CONCURRENCY_RETRY_MS,
        },
      );
    }
    throw new ProtocolError(
      ErrorCode.RateLimited,
      `Rate limited: at most ${this.limits.perMinute} tool calls per minute per identity; retry after ${verdict.retryAfterMs} ms`,
      {
        limit: 'perMinute',
        max: this.limits.perMinute,
        retryAfterMs: verdict.retryAfterMs,
      },
    );
  }
}

/** A store that cannot answer makes the call Unavailable (the bus shares its Redis: it is down too). */
async function guard<T>(operation: Promise<T>): Promise<T> {
  try {
    return await operation;
  } catch (err) {
    if (err instanceof QuotaStoreDown) throw new ProtocolError(ErrorCode.Unavailable, `Unavailable: ${err.message}; try again shortly`);
    throw err;
  }
}

/**
 * A refusal is answered after its retry hint, at most REFUSAL_DELAY_MS: a client that honours
 * `retryAfterMs` loses nothing, and one that retries at once (a hostile tenant spinning on its
 * limit) is slowed to a few refusals per second per connection instead of thousands, which would
 * otherwise take the gateway's time from every other identity (measured: bench noisy-neighbour).
 */
export const REFUSAL_DELAY_MS = 250;

function tarpit(err: ProtocolError, signal: AbortSignal): Promise<void> {
  const hint = (err.data as { retryAfterMs?: number } | undefined)?.retryAfterMs ?? REFUSAL_DELAY_MS;
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.min(REFUSAL_DELAY_MS, Math.max(0, hint)));
    if (signal.aborted) done();
    else signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * A ToolRunner that takes a rate-limit slot for each call it passes on. Given the scheduler the
 * inner runner admits calls with, it takes the call's admission in the same step when the
 * scheduler allows (nobody of that tenant waits here) and hands it on in `extras.admission`.
 */
export class RateLimitedRunner implements ToolRunner {
  constructor(
    private readonly inner: ToolRunner,
    private readonly limiter: RateLimiter,
    private readonly scheduler?: Scheduler,
  ) {}

  async run(tool: AnyTool, args: unknown, caller: Caller, signal: CallSignal, extras?: CallExtras): Promise<ToolResult> {
    let entry: { release(): void; extra?: Lease };
    try {
      entry = await this.limiter.enter(caller.tenant, extras?.admission ? undefined : this.scheduler?.entryFor(caller.tenant));
    } catch (err) {
      if (err instanceof ProtocolError && err.code === ErrorCode.RateLimited) await tarpit(err, signalOf(signal));
      throw err;
    }
    try {
      // The admission goes on with the call: the bus runner releases it (the one place).
      const admission = entry.extra && this.scheduler?.adopt(entry.extra);
      return await this.inner.run(tool, args, caller, signal, admission ? { ...extras, admission } : extras);
    } finally {
      entry.release();
    }
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
