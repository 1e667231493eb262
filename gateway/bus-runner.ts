/**
 * The gateway's ToolRunner: every validated tools/call becomes a job on the bus, with the
 * caller as tenant and a deadline, and its result (or a ProtocolError) comes back.
 *
 * With a Scheduler, a call first waits for its tenant's admission (gateway/scheduling): the job
 * goes on the bus only while its tenant has fewer than its share of jobs there, so no tenant can
 * fill an executor's slots. The wait counts against the call's deadline, not its start-by: a
 * call waiting behind its own tenant's work is queued, not unavailable. A call may come admitted
 * already (`extras.admission`: the gateway took it with the rate-limit counters).
 *
 * This runner is the one place an admission is released, whoever took it: when the call ends,
 * however it ends. The wait for admission is bounded by the call's own deadline timer, which
 * the bus then takes over (see CallBus: one deadline owner per side).
 */
import { randomUUID } from 'node:crypto';
import type { Caller } from '../shared/auth/permissions';
import type { CallBus } from '../shared/bus/bus';
import { CallTimer } from '../shared/bus/call-timer';
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';
import { CallExtras, CallSignal, signalOf, ToolRunner } from '../shared/tools/runner';
import type { AnyTool, ToolResult } from '../shared/tools/tool';
import type { Admission, Scheduler } from './scheduling/scheduler';

export interface BusRunnerOptions {
  callTimeoutMs: number;
  queueTimeoutMs: number;
}

export class BusToolRunner implements ToolRunner {
  constructor(
    private readonly bus: CallBus,
    private readonly options: BusRunnerOptions,
    private readonly scheduler?: Scheduler,
  ) {}

  async run(tool: AnyTool, args: unknown, caller: Caller, callSignal: CallSignal, extras?: CallExtras): Promise<ToolResult> {
    let admission: Admission | undefined = extras?.admission;
    try {
      const signal = signalOf(callSignal);
      const deadline = Date.now() + this.options.callTimeoutMs;
      let timer: CallTimer | undefined;
      if (!admission && this.scheduler) ({ admission, timer } = await this.admit(this.scheduler, tool, caller.tenant, deadline, signal));
      const now = Date.now();
      return await this.bus.call(
        {
          ...(extras?.trace ? { trace: extras.trace } : {}),
          ...(extras?.onProgress ? { progress: true } : {}),
          id: extras?.taskId ?? randomUUID(),
          ...(extras?.taskId ? { taskId: extras.taskId } : {}),
          tenant: caller.tenant,
          permissions: [...caller.permissions],
          tool: tool.name,
          args,
          deadline,
          startBy: Math.min(deadline, now + this.options.queueTimeoutMs),
        },
        signal,
        extras?.onProgress || timer ? { onProgress: extras?.onProgress, timer } : undefined,
      );
    } finally {
      admission?.release();
    }
  }

  async close(): Promise<void> {
    // The bus and the scheduler are owned by the composition root, which closes them.
  }

  /**
   * Waits for the tenant's admission until the caller leaves or the deadline passes; the call's
   * deadline timer starts here and goes on to the bus with the call.
   */
  private async admit(scheduler: Scheduler, tool: AnyTool, tenant: string, deadline: number, signal: AbortSignal) {
    // One signal for both ends, whose listener on the caller's signal is removed once admitted
    // (a batch's calls share one signal: AbortSignal.any would keep one listener per call).
    const waiting = new AbortController();
    const onCaller = () => waiting.abort(signal.reason);
    const timer = new CallTimer(deadline, () =>
      waiting.abort(
        new ProtocolError(ErrorCode.Timeout, `Timeout: ${tool.name} did not finish before its deadline (it waited behind its tenant's earlier calls)`),
      ),
    );
    if (signal.aborted) onCaller();
    else signal.addEventListener('abort', onCaller, { once: true });
    try {
      return { admission: await scheduler.admit(tenant, waiting.signal), timer };
    } catch (err) {
      timer.stop();
      if (err instanceof ProtocolError) throw err;
      throw new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
    } finally {
      signal.removeEventListener('abort', onCaller);
    }
  }
}
