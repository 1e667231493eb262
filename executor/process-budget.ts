/**
 * Live processes per identity, counted on every executor together
 * (TOOLGATE_MAX_PROCESSES_PER_IDENTITY). TOOLGATE_MAX_PROCESSES caps one sandbox; a tenant whose
 * shard several executors consume has a sandbox on each, so without this it would hold that many
 * on every one of them.
 *
 * One process is one lease in the QuotaStore under `processes:<identity>` — on Redis when a Redis
 * bus is configured (atomic, shared by every executor), in memory for embedded `serve`:
 *   run_command    holds its lease while the call runs;
 *   start_process  holds it from before the call until the agent reports the process ended
 *                  (exited or killed, and its output closed: Sandbox.processEnded) or the
 *                  sandbox ends; a start that fails, or whose process is already over, returns it at once.
 * Nothing else has to remember to release: the call's end, the process's end, the sandbox's end
 * (idle, evicted, died, executor shutdown) each settle it, closing the store releases what is
 * left, and an executor that dies without closing stops renewing its leases on Redis, which then
 * lapse within the store's lease lifetime (6 s).
 *
 * The count is what the executor saw through its tool calls: a process a command detaches from
 * its group and pipes is not counted (TOOLGATE_MAX_PROCESSES and the backend's pid limit still
 * bound the sandbox), and the agent, which runs inside the sandbox, reports the ends — a subverted
 * agent could free its own tenant's count, which it could exceed anyway by forking.
 */
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';
import type { Lease, QuotaStore } from '../shared/quota/store';
import { quotaKey, QuotaStoreDown } from '../shared/quota/store';
import type { ToolResult } from '../shared/tools/tool';
import type { Sandbox } from './sandbox/backend';

/** The tools that start a process in the sandbox. */
const COUNTED: ReadonlySet<string> = new Set(['run_command', 'start_process']);

/** The longest a start_process may take to answer (it is not cancelled before: startUncancelled). */
const START_ANSWER_MS = 10_000;

/** A refusal cannot know when a process will end; the hint it gives. */
export const PROCESS_RETRY_MS = 1000;

export class ProcessBudget {
  constructor(
    private readonly store: QuotaStore,
    /** Live processes per identity; TOOLGATE_MAX_PROCESSES_PER_IDENTITY. */
    readonly max: number,
  ) {
    if (!(max > 0)) throw new RangeError('the process budget must be positive');
  }

  /**
   * Runs `call` — `tool` in `tenant`'s `sandbox`, under `signal` — holding one of the identity's
   * process leases when the tool starts a process; other tools run as they are. Throws the RateLimited
   * ProtocolError when the identity's processes are all live, Unavailable when the store cannot
   * answer.
   */
  async run(tenant: string, tool: string, sandbox: Sandbox, signal: AbortSignal, call: (signal: AbortSignal) => Promise<ToolResult>): Promise<ToolResult> {
    if (!COUNTED.has(tool)) return call(signal);
    const lease = await this.take(tenant);
    let kept = false;
    try {
      if (tool !== 'start_process') return await call(signal); // cancelling it kills the command
      const result = await startUncancelled(call);
      kept = keepUntilEnded(sandbox, result, lease);
      return result;
    } finally {
      if (!kept) void lease.release();
    }
  }

  /** Live processes `tenant` has on every executor sharing the store. */
  held(tenant: string): Promise<number> {
    return this.store.held(quotaKey.processes(tenant));
  }

  private async take(tenant: string): Promise<Lease> {
    let lease: Lease | undefined;
    try {
      lease = await this.store.lease(quotaKey.processes(tenant), this.max);
    } catch (err) {
      if (err instanceof QuotaStoreDown) throw new ProtocolError(ErrorCode.Unavailable, `Unavailable: ${err.message}; try again shortly`);
      throw err;
    }
    if (lease) return lease;
    throw new ProtocolError(
      ErrorCode.RateLimited,
      `Rate limited: at most ${this.max} processes may be live at once per identity (TOOLGATE_MAX_PROCESSES_PER_IDENTITY), ` +
        'counting run_command calls still running and start_process processes not yet ended, on every executor. ' +
        'Stop one with kill_process, or wait for one to end, then retry',
      { limit: 'processes', max: this.max, retryAfterMs: PROCESS_RETRY_MS },
    );
  }
}

/**
 * A start_process once sent is not cancelled by its caller: the agent would start the process
 * all the same (spawning is not interruptible) and, the request being cancelled, never reply with
 * its handle — a live process nobody counts, and a way around the budget. Starting takes
 * milliseconds, so the call waits for the answer (a caller that left ignores it), bounded on its
 * own by START_ANSWER_MS in case the agent hangs.
 */
async function startUncancelled(call: (signal: AbortSignal) => Promise<ToolResult>): Promise<ToolResult> {
  const bound = new AbortController();
  const timer = setTimeout(
    () => bound.abort(new ProtocolError(ErrorCode.Timeout, `Timeout: the sandbox did not start the process within ${START_ANSWER_MS / 1000} s`)),
    START_ANSWER_MS,
  );
  try {
    return await call(bound.signal);
  } finally {
    clearTimeout(timer);
  }
}

/** A started process keeps the lease until it ends; true when it did (the caller must not release it). */
function keepUntilEnded(sandbox: Sandbox, result: ToolResult, lease: Lease): boolean {
  if (result.isError) return false;
  const started = result.structuredContent as { handle?: unknown; running?: unknown } | undefined;
  if (typeof started?.handle !== 'string' || started.running !== true) return false;
  void sandbox.processEnded(started.handle).then(() => lease.release());
  return true;
}
