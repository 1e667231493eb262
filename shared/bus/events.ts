/**
 * Events modules publish on the bus. Payloads carry identities, tool names, outcomes, durations
 * and argument *shapes* only — never file contents, command output or secrets.
 */
import type { SecretUsedEvent } from '../secrets/broker';
import type { TraceContext } from '../trace';

/** The shape of a tool call's arguments: keys and value types, never values (see `argumentShape`). */
export type ArgumentShape = Record<string, string>;

/**
 * Published by whoever runs the job, from the job it received: a `trace` here shows the caller's
 * trace context reached the executor (it is absent when the gateway gave up on a job no executor ran).
 */
interface RunEvent {
  jobId: string;
  tenant: string;
  tool: string;
  at: number;
  trace?: TraceContext;
}

/**
 * An outcome may name the argument shape (the executor of a Redis bus does: the `job.enqueued`
 * that also names it comes from another process, later than the audit wants to wait).
 */
interface Outcome {
  args?: ArgumentShape;
}

/**
 * A connection the egress proxy refused (policy, SSRF guard or a limit) before connecting
 * (executor/egress/). Host names and counts only: never request lines, headers or payload.
 */
export interface EgressDeniedEvent {
  type: 'egress.denied';
  tenant: string;
  host: string;
  port: number;
  /** The sentence the client got in its 403 body, after "refused host:port: ". */
  reason: string;
  /** Present when a per-tenant limit (connections at once, bytes per day) refused it. */
  limited?: true;
  at: number;
}

/** An egress connection that was opened and has ended (normally, by error, or cut at a limit). */
export interface EgressClosedEvent {
  type: 'egress.closed';
  tenant: string;
  host: string;
  port: number;
  /** The address connected to (the one the policy checked). */
  address: string;
  /** Bytes received from upstream (to the sandbox) and sent upstream (from it). */
  bytesIn: number;
  bytesOut: number;
  durationMs: number;
  /** Why it ended early, if it did: a limit, a socket error code, … */
  error?: string;
  at: number;
}

export type BusEvent =
  | { type: 'job.enqueued'; jobId: string; tenant: string; tool: string; at: number; args: ArgumentShape }
  | ({ type: 'job.started' } & RunEvent)
  | ({ type: 'job.completed'; durationMs: number; isError: boolean } & Outcome & RunEvent)
  | ({ type: 'job.failed'; durationMs: number; code: number; reason: string } & Outcome & RunEvent)
  | { type: 'sandbox.started'; tenant: string; backend: string; at: number; startMs: number }
  | { type: 'sandbox.stopped'; tenant: string; backend: string; at: number; reason: string }
  | { type: 'token.revoked'; id: string; notBefore: number; at: number }
  | EgressDeniedEvent
  | EgressClosedEvent
  | SecretUsedEvent;

/**
 * Describes arguments without their values: `{path: "string(12)", edits: "array(3)", dryRun: "boolean"}`.
 * String lengths and array sizes help an operator; contents never reach a log.
 */
export function argumentShape(args: unknown): ArgumentShape {
  const shape: ArgumentShape = {};
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return shape;
  for (const [key, value] of Object.entries(args)) {
    if (typeof value === 'string') shape[key] = `string(${value.length})`;
    else if (Array.isArray(value)) shape[key] = `array(${value.length})`;
    else if (value === null) shape[key] = 'null';
    else shape[key] = typeof value;
  }
  return shape;
}
