/**
 * The gateway's ToolRunner: every validated tools/call becomes a job on the bus, with the
 * caller as tenant and a deadline, and its result (or a ProtocolError) comes back.
 *
 * With a Scheduler, a call first waits for its tenant's admission (shared/scheduling): the job
 * goes on the bus only while its tenant has fewer than its share of jobs there, so no tenant can
 * fill an executor's slots. The wait counts against the call's deadline, not its start-by: a
 * call waiting behind its own tenant's work is queued, not unavailable. A call may come admitted
 * already (`extras.admission`: the gateway took it with the rate-limit counters).
 */
import { randomUUID } from 'node:crypto';
import type { Caller } from '../auth/permissions';
import { ErrorCode, ProtocolError } from '../protocol/errors';
import type { Scheduler } from '../scheduling/scheduler';
import { CallExtras, CallSignal, signalOf, ToolRunner } from '../tools/runner';
import type { AnyTool, ToolResult } from '../tools/tool';
import type { Bus } from './bus';

export interface BusRunnerOptions {
  callTimeoutMs: number;
  queueTimeoutMs: number;
}

const MAX_TIMER_MS = 2 ** 31 - 1;

export class BusToolRunner implements ToolRunner {
  constructor(
    private readonly bus: Bus,
    private readonly options: BusRunnerOptions,
    private readonly scheduler?: Scheduler,
  ) {}

  async run(tool: AnyTool, args: unknown, caller: Caller, callSignal: CallSignal, extras?: CallExtras): Promise<ToolResult> {
    const signal = signalOf(callSignal);
    const deadline = Date.now() + this.options.callTimeoutMs;
    const admission = extras?.admission ?? (this.scheduler ? await this.admit(tool, caller.id, deadline, signal) : undefined);
    try {
      const now = Date.now();
      return await this.bus.call(
        {
          ...(extras?.trace ? { trace: extras.trace } : {}),
          ...(extras?.onProgress ? { progress: true } : {}),
          id: extras?.taskId ?? randomUUID(),
          ...(extras?.taskId ? { taskId: extras.taskId } : {}),
          tenant: caller.id,
          permissions: [...caller.permissions],
          tool: tool.name,
          args,
          deadline,
          startBy: Math.min(deadline, now + this.options.queueTimeoutMs),
        },
        signal,
        extras?.onProgress,
      );
    } finally {
      admission?.release();
    }
  }

  async close(): Promise<void> {
    // The bus and the scheduler are owned by the composition root, which closes them.
  }

  /** Waits for the tenant's admission until the caller leaves or the deadline passes. */
  private async admit(tool: AnyTool, tenant: string, deadline: number, signal: AbortSignal) {
    // One signal for both ends, whose listener on the caller's signal is removed once admitted
    // (a batch's calls share one signal: AbortSignal.any would keep one listener per call).
    const waiting = new AbortController();
    const onCaller = () => waiting.abort(signal.reason);
    const timer = setTimeout(
      () =>
        waiting.abort(
          new ProtocolError(ErrorCode.Timeout, `Timeout: ${tool.name} did not finish before its deadline (it waited behind its tenant's earlier calls)`),
        ),
      Math.min(MAX_TIMER_MS, Math.max(0, deadline - Date.now())),
    );
    if (signal.aborted) onCaller();
    else signal.addEventListener('abort', onCaller, { once: true });
    try {
      return await this.scheduler!.admit(tenant, waiting.signal);
    } catch (err) {
      if (err instanceof ProtocolError) throw err;
      throw new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onCaller);
    }
  }
}
