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

/**
 * A call's cancellation as a runner receives it: the AbortSignal, or something that makes it on
 * first read (the MCP server passes its request context, whose signal is made lazily: creating an
 * AbortSignal is a slow path in Node, ~4 µs, and most tools never look at theirs). Read it with
 * `signalOf` where it is used, not before.
 */
export type CallSignal = AbortSignal | { readonly signal: AbortSignal };

export const signalOf = (s: CallSignal): AbortSignal => (s instanceof AbortSignal ? s : s.signal);

export interface ToolRunner {
  /**
   * Runs `tool` with arguments already validated against its input schema. A failure inside
   * the tool resolves to an `isError` result; only protocol-level failures (timeout,
   * unavailable, cancelled) reject, with a ProtocolError.
   */
  run(tool: AnyTool, args: unknown, caller: Caller, signal: CallSignal, extras?: CallExtras): Promise<ToolResult>;
  /** Releases what the runner holds (sandboxes, processes). */
  close(): Promise<void>;
}
