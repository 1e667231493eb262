/**
 * Per-identity limits on tools/call: how many may run at once, and how many may start per
 * minute (a token bucket holding a minute's worth, refilled continuously, so a quiet caller may
 * burst). A refused call is a JSON-RPC error (-32004) whose `data.retryAfterMs` says when to try
 * again. State lives in this gateway process: N gateways behind a proxy allow N times the rate.
 */
import type { Caller } from '../shared/auth/permissions';
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';
import type { CallExtras, ToolRunner } from '../shared/tools/runner';
import type { AnyTool, ToolResult } from '../shared/tools/tool';

export interface RateLimits {
  /** tools/call running at once per identity. */
  maxConcurrent: number;
  /** tools/call started per identity per minute. */
  perMinute: number;
}

interface Account {
  running: number;
  tokens: number;
  refilledAt: number;
}

const MINUTE_MS = 60_000;
/**
 * A concurrency refusal cannot know when a running call will end; this is the hint it gives.
 * Short, because calls are usually quick, and a client backing off exponentially will adapt.
 */
export const CONCURRENCY_RETRY_MS = 250;
/** Idle accounts are swept after this many acquisitions, so memory follows active identities. */
const SWEEP_EVERY = 1024;

export class RateLimiter {
  private readonly accounts = new Map<string, Account>();
  private acquisitions = 0;

  constructor(
    private readonly limits: RateLimits,
    private readonly now: () => number = Date.now,
  ) {
    if (!(limits.maxConcurrent > 0) || !(limits.perMinute > 0)) throw new RangeError('rate limits must be positive');
  }

  /** Takes a slot for `identity` or throws the RateLimited ProtocolError. Call the returned function once, when the call ends. */
  acquire(identity: string): () => void {
    if (++this.acquisitions % SWEEP_EVERY === 0) this.sweep();
    const account = this.account(identity);
    if (account.running >= this.limits.maxConcurrent) {
      throw new ProtocolError(ErrorCode.RateLimited, `Rate limited: at most ${this.limits.maxConcurrent} tool calls may run at once per identity; retry after ${CONCURRENCY_RETRY_MS} ms`, {
        limit: 'concurrent',
        max: this.limits.maxConcurrent,
        retryAfterMs: CONCURRENCY_RETRY_MS,
      });
    }
    if (account.tokens < 1) {
      const retryAfterMs = Math.max(1, Math.ceil((1 - account.tokens) * (MINUTE_MS / this.limits.perMinute)));
      throw new ProtocolError(ErrorCode.RateLimited, `Rate limited: at most ${this.limits.perMinute} tool calls per minute per identity; retry after ${retryAfterMs} ms`, {
        limit: 'perMinute',
        max: this.limits.perMinute,
        retryAfterMs,
      });
    }
    account.tokens -= 1;
    account.running += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      account.running -= 1;
    };
  }

  /** How many identities have state (for tests of the sweep). */
  get tracked(): number {
    return this.accounts.size;
  }

  private account(identity: string): Account {
    const now = this.now();
    let account = this.accounts.get(identity);
    if (!account) {
      account = { running: 0, tokens: this.limits.perMinute, refilledAt: now };
      this.accounts.set(identity, account);
    } else this.refill(account, now);
    return account;
  }

  private refill(account: Account, now: number): void {
    const elapsed = Math.max(0, now - account.refilledAt);
    account.tokens = Math.min(this.limits.perMinute, account.tokens + (elapsed * this.limits.perMinute) / MINUTE_MS);
    account.refilledAt = now;
  }

  /** Forgets accounts with nothing running and a full bucket: they behave exactly like new ones. */
  sweep(): void {
    const now = this.now();
    for (const [identity, account] of this.accounts) {
      this.refill(account, now);
      if (account.running === 0 && account.tokens >= this.limits.perMinute) this.accounts.delete(identity);
    }
  }
}

/** A ToolRunner that takes a rate-limit slot for each call it passes on. */
export class RateLimitedRunner implements ToolRunner {
  constructor(
    private readonly inner: ToolRunner,
    private readonly limiter: RateLimiter,
  ) {}

  async run(tool: AnyTool, args: unknown, caller: Caller, signal: AbortSignal, extras?: CallExtras): Promise<ToolResult> {
    const release = this.limiter.acquire(caller.id);
    try {
      return await this.inner.run(tool, args, caller, signal, extras);
    } finally {
      release();
    }
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
