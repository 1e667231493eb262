/**
 * What the shim must learn from one stdin frame before relaying it untouched: the request ids
 * owed a reply (so a failed POST still answers each of them), whether it was a batch (the shape
 * of that answer), and which requests it cancels.
 */
import { classify, JsonRpcId } from '../protocol/jsonrpc';

export interface FrameInfo {
  batch: boolean;
  /** Ids of the messages the gateway must answer with their own id, in frame order. */
  ids: JsonRpcId[];
  /** Request ids named by `notifications/cancelled` messages in the frame. */
  cancels: JsonRpcId[];
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
  return { batch, ids, cancels };
}
