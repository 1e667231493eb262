/**
 * What the Redis bus puts on the wire besides BullMQ's own keys: channel names, the reply a
 * worker publishes to its caller's gateway, and the tenant → shard hash every process must
 * agree on.
 */
import { ErrorCode, ErrorCodeValue, ProtocolError, toErrorObject } from '../protocol/errors';
import { parseKnownJson } from '../protocol/known-json';
import type { ToolResult } from '../tools/tool';

export const REPLY_CHANNEL_PREFIX = 'toolgate:reply:';
/** Job ids whose running executor should abort them. */
export const CANCEL_CHANNEL = 'toolgate:cancel';

export const queueName = (shard: number) => `toolgate-calls-${shard}`;

/** The tenant's shard: FNV-1a (32 bit) of its UTF-8 bytes, so every process and version agrees. */
export function shardOf(tenant: string, shards: number): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(tenant, 'utf8')) hash = Math.imul(hash ^ byte, 0x01000193);
  return (hash >>> 0) % shards;
}

export type Outcome = { result: ToolResult } | { error: ProtocolError };

export interface Reply {
  id: string;
  outcome: Outcome;
  /**
   * No handler ran (the executor died and BullMQ failed the job, or the executor refused a job
   * whose caller had given up): no job event reports it, so the gateway publishes job.failed.
   */
  unreported: boolean;
}

type WireReply =
  { id: string; ok: true; result: ToolResult } | { id: string; ok: false; error: { code: number; message: string; data?: unknown }; unreported?: boolean };

export function encodeReply(id: string, outcome: Outcome, unreported = false, onUnencodable?: (err: unknown) => void): string {
  try {
    return JSON.stringify('result' in outcome ? { id, ok: true, result: outcome.result } : { id, ok: false, error: toErrorObject(outcome.error), unreported });
  } catch (err) {
    // A result JSON cannot carry (a cycle, a BigInt) must still answer the caller.
    onUnencodable?.(err);
    return JSON.stringify({ id, ok: false, error: toErrorObject(new ProtocolError(ErrorCode.InternalError, 'Internal error')) });
  }
}

/**
 * A progress frame: the running tool's newest line, on the same reply channel as the outcome, so
 * it reaches the one gateway whose caller waits (and is ordered before the reply it precedes).
 */
export function encodeProgress(id: string, message: string): string {
  return JSON.stringify({ id, progress: message });
}

/**
 * The frame an executor publishes on the caller's reply channel when it has taken a job, and
 * awaits before it starts the tool: a gateway that never heard it knows the tool never started
 * (bullmq-producer.ts), whatever Redis loses afterwards. Not JSON, so a reply is never mistaken
 * for it and it costs one prefix test to recognize.
 */
const TAKEN_PREFIX = 'taken:';
export const encodeTaken = (id: string): string => `${TAKEN_PREFIX}${id}`;

/** The job id of a taken frame; undefined for anything else. */
export function decodeTaken(message: string): string | undefined {
  return message.startsWith(TAKEN_PREFIX) ? message.slice(TAKEN_PREFIX.length) : undefined;
}

/** Undefined for anything that is not a progress frame. */
export function decodeProgress(message: string): { id: string; message: string } | undefined {
  if (!message.includes('"progress"')) return undefined;
  try {
    const wire = JSON.parse(message) as { id?: unknown; progress?: unknown };
    return typeof wire.id === 'string' && typeof wire.progress === 'string' ? { id: wire.id, message: wire.progress } : undefined;
  } catch {
    return undefined;
  }
}

/** How a result reply produced by `encodeReply` begins (an id needing no JSON escapes, as ours are), and what precedes its result. */
const RESULT_HEAD = '{"id":"';
const RESULT_MID = '","ok":true,"result":';
const PLAIN_ID = /^[A-Za-z0-9._:-]{1,200}$/;

/**
 * A result reply as `encodeReply` writes it, parsed so that the result's own JSON text is kept
 * (shared/protocol/known-json.ts: the JSON-RPC reply splices it rather than serializing the
 * result again). The result's text alone goes through JSON.parse, which accepts exactly one JSON
 * value: a message of any other form (an error, trailing members) is left to the general path.
 */
function decodeResultReply(message: string): Reply | undefined {
  if (!message.startsWith(RESULT_HEAD) || !message.endsWith('}')) return undefined;
  const mid = message.indexOf(RESULT_MID, RESULT_HEAD.length);
  if (mid < 0) return undefined;
  const id = message.slice(RESULT_HEAD.length, mid);
  if (!PLAIN_ID.test(id)) return undefined;
  try {
    return { id, outcome: { result: parseKnownJson(message.slice(mid + RESULT_MID.length, -1)) as ToolResult }, unreported: false };
  } catch {
    return undefined;
  }
}

/** Undefined for anything that is not a reply. */
export function decodeReply(message: string): Reply | undefined {
  const fast = decodeResultReply(message);
  if (fast) return fast;
  let wire: WireReply;
  try {
    wire = JSON.parse(message) as WireReply;
  } catch {
    return undefined;
  }
  if (typeof wire !== 'object' || wire === null || typeof wire.id !== 'string' || typeof (wire as { ok?: unknown }).ok !== 'boolean') return undefined;
  if (wire.ok === true) return { id: wire.id, outcome: { result: wire.result }, unreported: false };
  return { id: wire.id, outcome: { error: errorFromWire(wire.error) }, unreported: wire.unreported === true };
}

const KNOWN_CODES: ReadonlySet<number> = new Set(Object.values(ErrorCode));

function errorFromWire(error: { code: number; message: string; data?: unknown } | undefined): ProtocolError {
  if (!error || !KNOWN_CODES.has(error.code) || typeof error.message !== 'string') return new ProtocolError(ErrorCode.InternalError, 'Internal error');
  const data = typeof error.data === 'object' && error.data !== null ? (error.data as Record<string, unknown>) : undefined;
  return new ProtocolError(error.code as ErrorCodeValue, error.message, data);
}
