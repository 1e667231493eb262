/**
 * What the shim must learn from one stdin frame before relaying it untouched: the request ids
 * owed a reply (so a failed POST still answers each of them), whether it was a batch (the shape
 * of that answer), and which requests it cancels.
 */
import { looksModern, META_PROTOCOL_VERSION, metaOf } from '../shared/mcp/envelope';
import { encodeHeaderValue } from '../shared/mcp/header-value';
import { classify, JsonRpcId } from '../shared/protocol/jsonrpc';

export interface FrameInfo {
  batch: boolean;
  /** Ids of the messages the gateway must answer with their own id, in frame order. */
  ids: JsonRpcId[];
  /** Request ids named by `notifications/cancelled` messages in the frame. */
  cancels: JsonRpcId[];
  /**
   * The MCP 2026-07-28 request headers a modern message needs over HTTP (MCP-Protocol-Version,
   * Mcp-Method, Mcp-Name), mirrored from its body; empty for legacy frames, which need none.
   */
  headers: Record<string, string>;
}

/** The params field `Mcp-Name` mirrors, per method (MCP 2026-07-28 and the tasks extension). */
const NAME_FIELD: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

/** What the gateway compares against the body of a modern message (see gateway/modern-http.ts). */
function modernHeaders(element: unknown): Record<string, string> {
  const m = classify(element);
  if ((m.kind !== 'request' && m.kind !== 'notification') || !looksModern(m.method, m.params)) return {};
  const headers: Record<string, string> = {};
  const version = metaOf(m.params)?.[META_PROTOCOL_VERSION];
  if (typeof version === 'string' && /^[\x21-\x7e]+$/.test(version)) headers['mcp-protocol-version'] = version;
  headers['mcp-method'] = encodeHeaderValue(m.method);
  const params = m.params !== undefined && !Array.isArray(m.params) ? m.params : {};
  const field = NAME_FIELD[m.method];
  const name = field === undefined ? undefined : params[field];
  if (typeof name === 'string') headers['mcp-name'] = encodeHeaderValue(name);
  return headers;
}

const isValidId = (v: unknown): v is JsonRpcId => typeof v === 'string' || v === null || (typeof v === 'number' && Number.isFinite(v));

export function inspectFrame(payload: unknown): FrameInfo {
  const batch = Array.isArray(payload);
  const elements: unknown[] = batch ? payload : [payload];
  const ids: JsonRpcId[] = [];
  const cancels: JsonRpcId[] = [];
  for (const element of elements) {
    const m = classify(element);
    if (m.kind === 'request') ids.push(m.id);
    // An invalid message that carries a well-formed id is answered with that id (-32600), so the
    // agent may be waiting for it; one without an id is answered with null, which nobody awaits.
    else if (m.kind === 'invalid' && typeof element === 'object' && element !== null && 'id' in element && isValidId((element as { id: unknown }).id)) {
      ids.push(m.id);
    } else if (m.kind === 'notification' && m.method === 'notifications/cancelled') {
      const params = m.params;
      if (params && !Array.isArray(params) && 'requestId' in params && isValidId(params.requestId)) cancels.push(params.requestId);
    }
  }
  return { batch, ids, cancels, headers: batch ? {} : modernHeaders(payload) };
}
