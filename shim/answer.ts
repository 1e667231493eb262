/**
 * The shim's one translation from what the gateway did with a POST to what goes to stdout: a
 * single line, or nothing. Whatever happened (no connection, a timeout, an HTML error page, a
 * reply that lost an id), every request id in the frame gets exactly one answer, so an agent
 * never waits on a reply that cannot come.
 */
import { ErrorCode, JsonRpcErrorObject, ProtocolError, toErrorObject } from '../shared/protocol/errors';
import { classify, failure, JsonRpcResponse } from '../shared/protocol/jsonrpc';
import type { FrameInfo } from './frame';

/** How one POST ended. */
export type PostOutcome =
  | { kind: 'http'; status: number; body: string; retryAfter?: string }
  /** No usable HTTP answer (unreachable, TLS, timeout, reply too large), already described. */
  | { kind: 'failed'; error: ProtocolError }
  /** The agent cancelled every request in the frame: it expects no reply. */
  | { kind: 'cancelled' };

/** The line to write for `frame` (undefined: write nothing). `where` names the gateway in messages. */
export function answer(frame: FrameInfo, outcome: PostOutcome, where: string): string | undefined {
  if (outcome.kind === 'cancelled') return undefined;
  if (outcome.kind === 'failed') return errorsFor(frame, toErrorObject(outcome.error));
  const { status, body } = outcome;
  const parsed = parse(body);
  if (status >= 200 && status < 300) {
    if (parsed === NO_BODY) return errorsFor(frame, unavailable(`the gateway at ${where} answered HTTP ${status} with no reply`));
    if (parsed === NOT_JSON) return errorsFor(frame, unavailable(`the gateway at ${where} answered HTTP ${status} with a body that is not JSON`));
    return complete(frame, parsed, body, unavailable(`the gateway at ${where} sent no reply for this request`));
  }
  // An HTTP refusal that carries a JSON-RPC error (the gateway's 401) passes through as it is,
  // addressed to each request of the frame; anything else is described from its status.
  const carried = parsed === NO_BODY || parsed === NOT_JSON ? undefined : errorIn(parsed);
  return errorsFor(frame, carried ?? statusError(status, where, outcome.retryAfter));
}

const NO_BODY = Symbol('no body');
const NOT_JSON = Symbol('not JSON');

function parse(body: string): unknown {
  if (body.trim() === '') return NO_BODY;
  try {
    return JSON.parse(body);
  } catch {
    return NOT_JSON;
  }
}

const unavailable = (message: string): JsonRpcErrorObject => ({ code: ErrorCode.Unavailable, message });

function errorsFor(frame: FrameInfo, error: JsonRpcErrorObject): string | undefined {
  if (frame.ids.length === 0) return undefined; // notifications are never answered
  const replies = frame.ids.map((id) => failure(id, error));
  return JSON.stringify(frame.batch ? replies : replies[0]);
}

/**
 * A JSON reply is forwarded as it came when it answers every request of the frame in the frame's
 * shape. Otherwise it is rebuilt: the answers it has, and for each missing id the error the
 * gateway gave for the whole message (a null-id error, e.g. a batch over the limit) or `fallback`.
 */
function complete(frame: FrameInfo, parsed: unknown, text: string, fallback: JsonRpcErrorObject): string {
  const elements: unknown[] = Array.isArray(parsed) ? parsed : [parsed];
  const responses = elements.filter((e): e is JsonRpcResponse => classify(e).kind === 'response');
  if (frame.ids.length === 0) return oneLine(text, parsed); // nobody awaits it; pass it on
  const answered = new Set(responses.map((r) => r.id));
  const whole = Array.isArray(parsed) === frame.batch && responses.length === elements.length;
  if (whole && frame.ids.every((id) => answered.has(id))) return oneLine(text, parsed);

  const general = responses.find((r) => r.id === null && 'error' in r);
  const fill = general && 'error' in general ? general.error : fallback;
  const unused = [...responses];
  const rebuilt = frame.ids.map((id): JsonRpcResponse => {
    const at = unused.findIndex((r) => r.id === id);
    return at === -1 ? failure(id, fill) : unused.splice(at, 1)[0]!;
  });
  return JSON.stringify(frame.batch ? rebuilt : rebuilt[0]);
}

/** stdout is newline-delimited: a pretty-printed reply is compacted (JSON strings hold no raw newline). */
function oneLine(text: string, parsed: unknown): string {
  const trimmed = text.trim();
  return /[\r\n]/.test(trimmed) ? JSON.stringify(parsed) : trimmed;
}

/** The JSON-RPC error object a refusal body carries, as a single response or a batch's first. */
function errorIn(parsed: unknown): JsonRpcErrorObject | undefined {
  const first = Array.isArray(parsed) ? parsed[0] : parsed;
  const m = classify(first);
  if (m.kind !== 'response' || !m.error) return undefined;
  const { code, message } = m.error;
  return typeof code === 'number' && Number.isInteger(code) && typeof message === 'string' ? m.error : undefined;
}

function statusError(status: number, where: string, retryAfter: string | undefined): JsonRpcErrorObject {
  const said = `the gateway at ${where} answered HTTP ${status}`;
  switch (status) {
    case 401:
    case 403:
      return { code: ErrorCode.Unauthenticated, message: `${said}: check TOOLGATE_TOKEN and TOOLGATE_API_KEY` };
    case 413:
      return { code: ErrorCode.MessageTooLarge, message: `${said}: the message is larger than it accepts` };
    case 429: {
      const seconds = retryAfter !== undefined && /^\d+$/.test(retryAfter.trim()) ? Number(retryAfter) : undefined;
      return seconds === undefined
        ? { code: ErrorCode.RateLimited, message: `${said}: rate limited` }
        : { code: ErrorCode.RateLimited, message: `${said}: rate limited`, data: { retryAfterMs: seconds * 1000 } };
    }
  }
  if (status >= 500) return unavailable(said);
  // 3xx, 404, 405, 415...: the URL does not lead to a toolgate gateway as it expects to be called.
  return unavailable(`${said}; is --url the gateway's address?`);
}
