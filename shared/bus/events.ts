/**
 * Events modules publish on the bus. Payloads carry identities, tool names, outcomes, durations
 * and argument *shapes* only — never file contents, command output or secrets.
 */

/** The shape of a tool call's arguments: keys and value types, never values (see `argumentShape`). */
export type ArgumentShape = Record<string, string>;

export type BusEvent =
  | { type: 'job.enqueued'; jobId: string; tenant: string; tool: string; at: number; args: ArgumentShape }
  | { type: 'job.started'; jobId: string; tenant: string; tool: string; at: number }
  | { type: 'job.completed'; jobId: string; tenant: string; tool: string; at: number; durationMs: number; isError: boolean }
  | { type: 'job.failed'; jobId: string; tenant: string; tool: string; at: number; durationMs: number; code: number; reason: string }
  | { type: 'sandbox.started'; tenant: string; backend: string; at: number; startMs: number }
  | { type: 'sandbox.stopped'; tenant: string; backend: string; at: number; reason: string }
  | { type: 'token.revoked'; id: string; notBefore: number; at: number };

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
