/**
 * What the executor and a sandbox agent say to each other: JSON-RPC 2.0, one message per line,
 * over the agent's stdin/stdout. Not MCP: the agent's one peer is the executor (or `stdio` beside
 * a bwrap sandbox), which has already authenticated the caller, checked the permission and parsed
 * the arguments against the tool's schema. So the agent has no lifecycle, no permissions, no
 * caller and no schemas (it never loads zod: ~10 MiB of its RSS), and the executor in turn reads
 * everything the agent sends as untrusted (sandbox/agent-client.ts, sandbox/reply-limits.ts).
 *
 * Executor → agent, requests (each answered once, except one cancelled first):
 * - `ping` → `{}`: the agent is up and reading (AgentConnection.open waits for it).
 * - `sandbox/bind` → BoundRoot: a pre-started agent (`--await-bind`, agent/bind.ts) enters the
 *   workspace now mounted at its root. Any other agent answers -32601.
 * - `tools/call` ToolCallParams → a tool result (`{content, structuredContent?, isError?}`). A tool
 *   that fails is an `isError` result; an unknown tool is -32602; no workspace yet is -32006.
 * Executor → agent, notification:
 * - `notifications/cancelled` CancelledParams: that call's tool is aborted; the call gets no reply.
 * Agent → executor, notifications:
 * - `notifications/progress` ProgressParams: the newest output line of a call that asked for
 *   progress, at most one per PROGRESS_GAP_MS (the newest wins); none after the call's reply.
 * - `toolgate/processEnded` ProcessEndedParams: a start_process process has ended (it and
 *   everything holding its output: see ProcessTable); the executor counts live processes per
 *   identity across the cluster and returns the process's share then.
 */

export const PING = 'ping';
export const BIND_METHOD = 'sandbox/bind';
export const TOOLS_CALL = 'tools/call';
export const CANCELLED = 'notifications/cancelled';
export const PROGRESS = 'notifications/progress';
export const PROCESS_ENDED = 'toolgate/processEnded';

export interface ToolCallParams {
  name: string;
  /** Parsed by the sender against the tool's input schema (defaults applied); run as received. */
  arguments: Record<string, unknown>;
  /** Present when the sender wants the call's progress: its token is the request's own id. */
  _meta?: { progressToken: number };
}

export interface BoundRoot {
  dev: number;
  ino: number;
}

export interface CancelledParams {
  requestId: number;
  reason?: string;
}

export interface ProgressParams {
  progressToken: number;
  /** Grows by one with each notification for the call. */
  progress: number;
  message: string;
}

export interface ProcessEndedParams {
  handle: string;
}

/** The agent's progress pace: the executor paces progress for the client; this only coalesces. */
export const PROGRESS_GAP_MS = 100;
