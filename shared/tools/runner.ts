/**
 * How a validated tool call gets executed. The MCP server decides *whether* a call may run
 * (permission, schema); a ToolRunner decides *where*: in this process, in a sandbox agent, or
 * across the bus on an executor.
 */
import type { Caller } from '../auth/permissions';
import type { TraceContext } from '../trace';
import type { AnyTool, ToolResult } from './tool';

/** What travels with a call besides its arguments, for whoever runs it (logs, the bus). */
export interface CallExtras {
  /** The caller's trace context (`_meta.traceparent`/`tracestate`), carried to the executor's audit line. */
  trace?: TraceContext;
  /** Receives what a running call reports (its newest output line); present when the caller asked for progress. */
  onProgress?: (message: string) => void;
  /** The call may become this task: on a bus, the job takes this id and ends the task itself. */
  taskId?: string;
  /**
   * The call's admission to the bus, already taken (the gateway takes it with the rate-limit
   * counters in one step, gateway/rate-limit.ts): whoever runs the call releases it when done.
   */
  admission?: { release(): void };
}

export interface ToolRunner {
  /**
   * Runs `tool` with arguments already validated against its input schema. A failure inside
   * the tool resolves to an `isError` result; only protocol-level failures (timeout,
   * unavailable, cancelled) reject, with a ProtocolError.
   */
  run(tool: AnyTool, args: unknown, caller: Caller, signal: AbortSignal, extras?: CallExtras): Promise<ToolResult>;
  /** Releases what the runner holds (sandboxes, processes). */
  close(): Promise<void>;
}
