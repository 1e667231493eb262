/**
 * The gateway's ToolRunner: every validated tools/call becomes a job on the bus, with the
 * caller as tenant and a deadline, and its result (or a ProtocolError) comes back.
 */
import { randomUUID } from 'node:crypto';
import type { Caller } from '../auth/permissions';
import type { CallExtras, ToolRunner } from '../tools/runner';
import type { AnyTool, ToolResult } from '../tools/tool';
import type { Bus } from './bus';

export interface BusRunnerOptions {
  callTimeoutMs: number;
  queueTimeoutMs: number;
}

export class BusToolRunner implements ToolRunner {
  constructor(
    private readonly bus: Bus,
    private readonly options: BusRunnerOptions,
  ) {}

  run(tool: AnyTool, args: unknown, caller: Caller, signal: AbortSignal, extras?: CallExtras): Promise<ToolResult> {
    const now = Date.now();
    return this.bus.call(
      {
        ...(extras?.trace ? { trace: extras.trace } : {}),
        ...(extras?.onProgress ? { progress: true } : {}),
        id: extras?.taskId ?? randomUUID(),
        ...(extras?.taskId ? { taskId: extras.taskId } : {}),
        tenant: caller.id,
        permissions: [...caller.permissions],
        tool: tool.name,
        args,
        deadline: now + this.options.callTimeoutMs,
        startBy: now + Math.min(this.options.queueTimeoutMs, this.options.callTimeoutMs),
      },
      signal,
      extras?.onProgress,
    );
  }

  async close(): Promise<void> {
    // The bus is owned by the composition root, which closes it.
  }
}
