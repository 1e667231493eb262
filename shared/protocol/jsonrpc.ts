/**
 * JSON-RPC 2.0 message shapes and their validation (https://www.jsonrpc.org/specification).
 * No I/O here: transports hand in parsed values, the dispatcher hands back replies.
 */
import { ErrorCode, JsonRpcErrorObject, ProtocolError } from './errors';
import { describeJsonSyntaxError } from './json-syntax';

export type JsonRpcId = string | number | null;
export type JsonRpcParams = Record<string, unknown> | unknown[];

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: JsonRpcId;
  method: string;
  params?: JsonRpcParams;
}
export interface JsonRpcNotification {
  jsonrpc: '2.0';
  method: string;
  params?: JsonRpcParams;
}
export interface JsonRpcSuccess {
  jsonrpc: '2.0';
  id: JsonRpcId;
  result: unknown;
}
export interface JsonRpcFailure {
  jsonrpc: '2.0';
  id: JsonRpcId;
  error: JsonRpcErrorObject;
}
export type JsonRpcResponse = JsonRpcSuccess | JsonRpcFailure;

/** What one element of an incoming payload turned out to be. */
export type Incoming =
  | { kind: 'request'; id: JsonRpcId; method: string; params: JsonRpcParams | undefined }
  | { kind: 'notification'; method: string; params: JsonRpcParams | undefined }
  | { kind: 'response'; id: JsonRpcId; result?: unknown; error?: JsonRpcErrorObject }
  | { kind: 'invalid'; id: JsonRpcId; reason: string };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const isValidId = (v: unknown): v is JsonRpcId => typeof v === 'string' || v === null || (typeof v === 'number' && Number.isFinite(v));

/** Classifies one message. Never throws: a malformed message is `invalid` with a reason. */
export function classify(value: unknown): Incoming {
  if (!isObject(value)) return { kind: 'invalid', id: null, reason: 'a message must be a JSON object' };
  // The reply to an invalid request carries its id when that id is itself well-formed.
  const id = isValidId(value.id) ? value.id : null;
  if (value.jsonrpc !== '2.0') return { kind: 'invalid', id, reason: 'jsonrpc must be exactly "2.0"' };
  if ('id' in value && !isValidId(value.id)) {
    return { kind: 'invalid', id: null, reason: 'id must be a string, a number or null' };
  }
  if (!('method' in value)) {
    if ('id' in value && ('result' in value || isObject(value.error))) {
      return { kind: 'response', id, result: value.result, error: value.error as JsonRpcErrorObject | undefined };
    }
    return { kind: 'invalid', id, reason: 'method is required' };
  }
  if (typeof value.method !== 'string') return { kind: 'invalid', id, reason: 'method must be a string' };
  const params = value.params;
  if (params !== undefined && !isObject(params) && !Array.isArray(params)) {
    return { kind: 'invalid', id, reason: 'params must be an object or an array' };
  }
  if (!('id' in value)) return { kind: 'notification', method: value.method, params };
  return { kind: 'request', id, method: value.method, params };
}

/**
 * True when a parsed value nests deeper than `max` arrays/objects. Iterative, so a hostile
 * 100,000-level document cannot exhaust the stack here (V8's JSON.parse is iterative too, but
 * JSON.stringify and schema validation are not: such values must be refused before them).
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > max) return true;
    const children = Array.isArray(node) ? node : Object.values(node as object);
    for (const child of children) {
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}

export const success = (id: JsonRpcId, result: unknown): JsonRpcSuccess => ({ jsonrpc: '2.0', id, result });
export const failure = (id: JsonRpcId, error: JsonRpcErrorObject): JsonRpcFailure => ({ jsonrpc: '2.0', id, error });

/** Parses one frame of text; a syntax error becomes the -32700 ProtocolError. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new ProtocolError(ErrorCode.ParseError, `Parse error: the message is not valid JSON${describeJsonSyntaxError(text)}`);
  }
}
