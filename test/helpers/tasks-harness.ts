/**
 * Test harness for MCP tasks with the official clients (jest + ts-jest, CommonJS).
 *
 * (a) Modern: `@modelcontextprotocol/client` 2.x pinned to 2026-07-28, tasks extension declared,
 *     wrapped by `@modelcontextprotocol/ext-tasks` (`createTaskSessionFromClient`, generation "v2").
 *     ext-tasks refuses a v2 session without `rawDispatch` + `v2RequestFraming`, because the SDK
 *     Client's result decoder rejects `resultType: "task"` (UnsupportedResultType). `rawDispatch`
 *     here sends the already-framed request through the Client's OWN transport (so the SDK still
 *     derives MCP-Protocol-Version / Mcp-Method / Mcp-Name from the body, and Authorization from
 *     requestInit) and catches its response before the Client sees it (string ids
 *     `ext-tasks-N`; the Client's own ids are numbers, so they cannot collide).
 * (b) Legacy: SDK 1.x Client (2025-11-25) with task-augmented tools/call (`params.task`) and raw
 *     tasks/get, tasks/result, tasks/list, tasks/cancel via `client.experimental.tasks`.
 * (c) Legacy through ext-tasks: a 2.x Client in the default legacy era → ext-tasks "v1" session.
 *
 * NOTE for jest: ext-tasks ships ESM only (exports has only "import"). Under ts-jest/CommonJS add
 * to jest.config.js (see README in this folder):
 *   moduleNameMapper: { '^@modelcontextprotocol/ext-tasks/(client|core|receiver)$':
 *       '<rootDir>/node_modules/@modelcontextprotocol/ext-tasks/dist/$1/index.js' },
 *   transformIgnorePatterns: ['/node_modules/(?!@modelcontextprotocol/ext-tasks/)'],
 *   transform: { '^.+\\.ts$': [...as today...],
 *                'node_modules/@modelcontextprotocol/ext-tasks/.+\\.js$':
 *                    ['ts-jest', { diagnostics: false, tsconfig: { allowJs: true, isolatedModules: true } }] },
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Transport, JSONRPCMessage } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import {
  createTaskSessionFromClient,
  type JsonRpcResponse,
  type RawClientDispatch,
  type SerializedTaskReference,
  type TaskEnabledSession,
  type TaskOutcome,
  type TaskView,
  type ToolExecution,
} from '@modelcontextprotocol/ext-tasks/client';
import type { JsonValue, TaskId } from '@modelcontextprotocol/ext-tasks/core';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyHttpTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport as LegacyStdioTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  type CallToolResult as LegacyCallToolResult,
  type CreateTaskResult as LegacyCreateTaskResult,
  type GetTaskResult as LegacyGetTaskResult,
  type ListTasksResult as LegacyListTasksResult,
} from '@modelcontextprotocol/sdk/types.js';

export const MODERN_VERSION = '2026-07-28';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** Where the server is: an HTTP URL, or a stdio command. */
export type Target = { url: string; headers?: Record<string, string> } | { command: string; args?: string[]; env?: Record<string, string>; cwd?: string };

const CLIENT_INFO = { name: 'toolgate-jest-tasks', version: '1.0.0' };
const MODERN_CAPABILITIES = { extensions: { [TASKS_EXTENSION]: {} } };

function isUrl(t: Target): t is { url: string; headers?: Record<string, string> } {
  return 'url' in t;
}

/** Authorization on HTTP via requestInit; on stdio the token goes in TOOLGATE_TOKEN (if given). */
function modernTransport(target: Target, token?: string): Transport {
  if (isUrl(target)) {
    const headers: Record<string, string> = { ...(target.headers ?? {}) };
    if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    return new StreamableHTTPClientTransport(new URL(target.url), { requestInit: { headers }, fetch: sameRealmFetch });
  }
  return new StdioClientTransport({
    command: target.command,
    args: target.args ?? [],
    env: { ...(process.env as Record<string, string>), ...(target.env ?? {}), ...(token !== undefined ? { TOOLGATE_TOKEN: token } : {}) },
    ...(target.cwd !== undefined ? { cwd: target.cwd } : {}),
    stderr: 'pipe',
  });
}

/**
 * Jest gotcha: jest runs tests in a vm context, but the global `fetch` (undici) lives in the outer
 * realm, so `response.json()` builds objects whose prototype is the OUTER Object.prototype.
 * ext-tasks' isJsonValue() requires `Object.getPrototypeOf(o) === Object.prototype` (this realm)
 * and rejects them ("Invalid result for tools/list: Expected a JSON value"). Re-parse the text
 * here, with this realm's JSON. Harmless outside jest.
 */
const sameRealmFetch = async (input: string | URL, init?: RequestInit): Promise<Response> => {
  const response = await fetch(input, init);
  const json = async () => JSON.parse(await response.text()) as unknown;
  return new Proxy(response, {
    get(target, prop) {
      if (prop === 'json') return json;
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
};

type RpcWire = { jsonrpc: '2.0'; id: string | number; result?: unknown; error?: { code: number; message: string; data?: unknown } };

/**
 * A raw request path over a connected Client's transport. Must be created AFTER client.connect()
 * (connect installs the Client's onmessage; we wrap it). Responses to our string ids are taken
 * here; everything else (progress, notifications/tasks, the Client's own responses) flows on.
 */
export function rawDispatchFor(transport: Transport, defaultTimeoutMs = 60_000): RawClientDispatch {
  let seq = 0;
  const pending = new Map<string, (m: RpcWire) => void>();
  const inner = transport.onmessage;
  transport.onmessage = ((message: JSONRPCMessage, extra?: unknown) => {
    const m = message as unknown as Partial<RpcWire>;
    if (typeof m.id === 'string' && pending.has(m.id) && ('result' in m || 'error' in m)) {
      const resolve = pending.get(m.id)!;
      pending.delete(m.id);
      resolve(m as RpcWire);
      return;
    }
    (inner as ((msg: JSONRPCMessage, extra?: unknown) => void) | undefined)?.(message, extra);
  }) as Transport['onmessage'];

  return async (request, options) => {
    const { method, params } = request as { method: string; params?: Record<string, unknown> };
    const id = `ext-tasks-${++seq}`;
    // Reserved headers (Mcp-Name, Mcp-Method, MCP-Protocol-Version, Authorization) are derived by
    // the transport from the body / connection; only extra headers pass through.
    const headers = Object.fromEntries(Object.entries(options?.context?.headers ?? {}).filter(([k]) => !/^(mcp-|authorization$|content-type$)/i.test(k)));
    const timeoutMs = options?.context?.requestTimeoutMs ?? defaultTimeoutMs;
    const reply = new Promise<RpcWire>((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`raw ${method} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      const onAbort = () => {
        clearTimeout(timer);
        pending.delete(id);
        reject(options?.signal?.reason ?? new Error('aborted'));
      };
      options?.signal?.addEventListener('abort', onAbort, { once: true });
      pending.set(id, (m) => {
        clearTimeout(timer);
        options?.signal?.removeEventListener('abort', onAbort);
        resolve(m);
      });
    });
    try {
      await transport.send({ jsonrpc: '2.0', id, method, ...(params !== undefined ? { params } : {}) } as JSONRPCMessage, {
        ...(Object.keys(headers).length > 0 ? { headers } : {}),
        ...(options?.signal !== undefined ? { requestSignal: options.signal } : {}),
      });
    } catch (e) {
      pending.delete(id);
      void reply.catch(() => {});
      throw e;
    }
    const m = await reply;
    if (m.error !== undefined) {
      return {
        kind: 'error',
        error: { code: m.error.code, message: m.error.message, ...(m.error.data !== undefined ? { data: m.error.data as JsonValue } : {}) },
      } satisfies JsonRpcResponse;
    }
    return { kind: 'result', result: (m.result ?? null) as JsonValue } satisfies JsonRpcResponse;
  };
}

// ───────────────────────────── (a) modern: 2026-07-28 + tasks extension ─────────────────────────────

export interface ModernTaskSession {
  client: Client;
  session: TaskEnabledSession;
  /** Same for every session against one target, so a second session can resumeTask(). */
  endpointId: string;
  /** The raw path (framed by the caller): use for wire assertions (error codes, other identity). */
  raw: RawClientDispatch;
  close(): Promise<void>;
}

export interface ModernOptions {
  /** Defaults to a string derived from the target, identical across sessions. */
  endpointId?: string;
  /** Per-request timeout for the raw path (tools/call and tasks/*). */
  rawTimeoutMs?: number;
}

/** A 2026-07-28 Client pinned to the modern revision with the tasks extension, wrapped by ext-tasks. */
export async function modernTaskSession(target: Target, token?: string, options: ModernOptions = {}): Promise<ModernTaskSession> {
  const client = new Client(CLIENT_INFO, {
    capabilities: MODERN_CAPABILITIES,
    versionNegotiation: { mode: { pin: MODERN_VERSION } },
  });
  const transport = modernTransport(target, token);
  await client.connect(transport);
  const raw = rawDispatchFor(transport, options.rawTimeoutMs);
  const endpointId = options.endpointId ?? `toolgate:${isUrl(target) ? target.url : [target.command, ...(target.args ?? [])].join(' ')}`;
  const session = createTaskSessionFromClient(client, {
    endpointId,
    rawDispatch: raw,
    v2RequestFraming: { protocolVersion: MODERN_VERSION, clientInfo: CLIENT_INFO, clientCapabilities: MODERN_CAPABILITIES },
    onError: () => {},
  });
  if (session.capabilities.execution !== true || session.capabilities.inputResponses !== true) {
    // generation "v2" gives {execution, cancellation, inputResponses: true}; "none" means the server
    // did not advertise capabilities.extensions["io.modelcontextprotocol/tasks"] as exactly {}.
    await session.close();
    await client.close();
    throw new Error(`server/discover did not advertise ${TASKS_EXTENSION}: {} (ext-tasks sees no v2 tasks support)`);
  }
  return {
    client,
    session,
    endpointId,
    raw,
    async close() {
      await session.close().catch(() => {});
      await client.close().catch(() => {});
    },
  };
}

/** Frames a raw modern request like ext-tasks does (envelope + tasks extension in _meta). */
export function framed(method: string, params: Record<string, unknown> = {}, declareTasks = true): JsonValue {
  return {
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': MODERN_VERSION,
        'io.modelcontextprotocol/clientInfo': CLIENT_INFO,
        'io.modelcontextprotocol/clientCapabilities': declareTasks ? MODERN_CAPABILITIES : {},
      },
    },
  } as JsonValue;
}

export type ModernExecution = ToolExecution<unknown>;

/** callTool through ext-tasks. `expectTask` (default true) throws if the server answered inline. */
export async function callTool(
  s: ModernTaskSession,
  name: string,
  args: Record<string, unknown>,
  expectTask = true,
): Promise<{ execution: ModernExecution; taskId?: string }> {
  const execution = await s.session.callTool(name, args as Record<string, JsonValue>);
  if (execution.kind === 'task') return { execution, taskId: execution.handle.taskId };
  if (expectTask) {
    await execution.close().catch(() => {});
    throw new Error(`${name}: the server answered inline, not with a task (resultType "task")`);
  }
  return { execution };
}

export interface Settled {
  status: 'completed' | 'failed' | 'cancelled';
  /** The tool result (CallToolResult incl. resultType "complete") when completed. */
  result?: unknown;
  /** code/message/data when failed (the task's JSON-RPC error, or a decode failure without code). */
  error?: { code?: number; message: string; data?: unknown };
  lastTask?: TaskView;
  /** Every task snapshot observed while settling (statusMessage shows progress). */
  events: TaskView[];
}

function fromOutcome(outcome: TaskOutcome<unknown>, lastTask: TaskView | undefined, events: TaskView[]): Settled {
  if (outcome.status === 'completed') return { status: 'completed', result: outcome.result, lastTask, events };
  if (outcome.status === 'failed') {
    const e = outcome.error;
    return {
      status: 'failed',
      error: { ...(e.code !== undefined ? { code: e.code } : {}), message: e.message, ...(e.data !== undefined ? { data: e.data } : {}) },
      lastTask,
      events,
    };
  }
  return { status: 'cancelled', lastTask, events };
}

/** Polls (at the server's pollIntervalMs) until terminal; never throws for failed/cancelled. */
export async function settle(execution: ModernExecution, signal?: AbortSignal): Promise<Settled> {
  const events: TaskView[] = [];
  const { outcome, lastTask } = await execution.settle({
    ...(signal !== undefined ? { signal } : {}),
    onEvent: (ev) => {
      if (ev.type === 'task') events.push(ev.task);
    },
  });
  return fromOutcome(outcome, lastTask, events);
}

/** Resume a task by id from ANOTHER session (same endpointId) and return its execution. */
export async function resumeTask(s: ModernTaskSession, taskId: string): Promise<ModernExecution> {
  const reference: SerializedTaskReference = { endpointId: s.endpointId, generation: 'v2', taskId: taskId as TaskId, originalOperation: 'tools/call' };
  return s.session.resumeTask(reference);
}

/** One tasks/get through ext-tasks (decoded view; throws JsonRpcResponseError on e.g. -32602). */
export async function snapshot(s: ModernTaskSession, taskId: string): Promise<TaskView> {
  return s.session.task(taskId as TaskId).snapshot();
}

/** tasks/cancel (ack only; the status turns cancelled eventually — poll snapshot() or settle()). */
export async function cancel(s: ModernTaskSession, taskId: string): Promise<void> {
  await s.session.cancelTask(taskId as TaskId);
}

/** Raw modern request (framed) → {kind:'result'|'error'}; for asserting exact wire answers. */
export async function rawModern(s: ModernTaskSession, method: string, params: Record<string, unknown>, declareTasks = true): Promise<JsonRpcResponse> {
  return s.raw(framed(method, params, declareTasks));
}

/** Wait until a predicate on the task snapshot holds (no fixed sleeps). */
export async function waitForTask(s: ModernTaskSession, taskId: string, pred: (t: TaskView) => boolean, timeoutMs = 30_000): Promise<TaskView> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const t = await snapshot(s, taskId);
    if (pred(t)) return t;
    if (Date.now() > end) throw new Error(`task ${taskId} never matched; last status ${t.status}`);
    await new Promise((r) => setTimeout(r, Math.max(10, t.suggestedPollIntervalMs ?? 100)));
  }
}

// ───────────────────────────── (b) legacy: SDK 1.x, 2025-11-25 task-augmented tools/call ─────────────

export interface LegacyTaskClient {
  client: LegacyClient;
  close(): Promise<void>;
}

/** An SDK 1.x client (initialize → 2025-11-25). Lists tools once so execution.taskSupport is cached. */
export async function legacyTaskClient(target: Target, token?: string): Promise<LegacyTaskClient> {
  const client = new LegacyClient(CLIENT_INFO, { capabilities: {} });
  const transport = isUrl(target)
    ? new LegacyHttpTransport(new URL(target.url), {
        requestInit: { headers: { ...(target.headers ?? {}), ...(token !== undefined ? { Authorization: `Bearer ${token}` } : {}) } },
      })
    : new LegacyStdioTransport({
        command: target.command,
        args: target.args ?? [],
        env: { ...(process.env as Record<string, string>), ...(target.env ?? {}), ...(token !== undefined ? { TOOLGATE_TOKEN: token } : {}) },
        ...(target.cwd !== undefined ? { cwd: target.cwd } : {}),
        stderr: 'pipe',
      });
  await client.connect(transport);
  await client.listTools();
  return { client, close: () => client.close() };
}

/** tools/call with params.task = {ttl} → the CreateTaskResult ({task:{taskId,status,ttl,...}}). */
export async function legacyCallAsTask(c: LegacyTaskClient, name: string, args: Record<string, unknown>, ttl?: number): Promise<LegacyCreateTaskResult> {
  return c.client.request({ method: 'tools/call', params: { name, arguments: args, task: ttl === undefined ? {} : { ttl } } }, CreateTaskResultSchema);
}

export const legacyGetTask = (c: LegacyTaskClient, taskId: string): Promise<LegacyGetTaskResult> => c.client.experimental.tasks.getTask(taskId);

/** tasks/result: blocks until terminal; the tool result with _meta["io.modelcontextprotocol/related-task"]. */
export const legacyTaskResult = (c: LegacyTaskClient, taskId: string, timeoutMs = 60_000): Promise<LegacyCallToolResult> =>
  c.client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, { timeout: timeoutMs }) as Promise<LegacyCallToolResult>;

export const legacyListTasks = (c: LegacyTaskClient, cursor?: string): Promise<LegacyListTasksResult> => c.client.experimental.tasks.listTasks(cursor);

/** Every page of tasks/list. */
export async function legacyListAllTasks(c: LegacyTaskClient): Promise<LegacyListTasksResult['tasks']> {
  const all: LegacyListTasksResult['tasks'] = [];
  let cursor: string | undefined;
  do {
    const page = await legacyListTasks(c, cursor);
    all.push(...page.tasks);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return all;
}

export const legacyCancelTask = (c: LegacyTaskClient, taskId: string) => c.client.experimental.tasks.cancelTask(taskId);

/** The SDK's own driver: callToolStream with a task → taskCreated, taskStatus…, result | error. */
export async function legacyCallToolStream(c: LegacyTaskClient, name: string, args: Record<string, unknown>, ttl?: number) {
  const messages: Array<{ type: string; [k: string]: unknown }> = [];
  for await (const m of c.client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
    task: ttl === undefined ? {} : { ttl },
  })) {
    messages.push(m as { type: string });
  }
  return messages;
}

/** Poll tasks/get until terminal (honours pollInterval). */
export async function legacyWaitTerminal(c: LegacyTaskClient, taskId: string, timeoutMs = 30_000): Promise<LegacyGetTaskResult> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const t = await legacyGetTask(c, taskId);
    if (t.status === 'completed' || t.status === 'failed' || t.status === 'cancelled') return t;
    if (Date.now() > end) throw new Error(`task ${taskId} still ${t.status}`);
    await new Promise((r) => setTimeout(r, Math.max(10, t.pollInterval ?? 100)));
  }
}

// ───────────────────────────── (c) legacy through ext-tasks (generation "v1") ────────────────────────

/** A 2.x Client in the default legacy era (initialize), wrapped by ext-tasks; calls with preference "prefer". */
export async function legacyExtTaskSession(target: Target, token?: string, endpointId?: string): Promise<ModernTaskSession> {
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  const transport = modernTransport(target, token);
  await client.connect(transport);
  const session = createTaskSessionFromClient(client, {
    endpointId: endpointId ?? `toolgate-legacy:${isUrl(target) ? target.url : target.command}`,
    onError: () => {},
  });
  const raw: RawClientDispatch = async () => {
    throw new Error('raw path not used for legacy sessions');
  };
  return {
    client,
    session,
    endpointId: session.endpointId,
    raw,
    async close() {
      await session.close().catch(() => {});
      await client.close().catch(() => {});
    },
  };
}

/** v1 callTool: the client only sends params.task when tools/list says execution.taskSupport optional|required. */
export async function legacyExtCallTool(s: ModernTaskSession, name: string, args: Record<string, unknown>) {
  const execution = await s.session.callTool(name, args as Record<string, JsonValue>, { task: { preference: 'prefer' } });
  return { execution, taskId: execution.kind === 'task' ? execution.handle.taskId : undefined };
}

export async function resumeLegacyExtTask(s: ModernTaskSession, taskId: string): Promise<ModernExecution> {
  return s.session.resumeTask({ endpointId: s.endpointId, generation: 'v1', taskId: taskId as TaskId, originalOperation: 'tools/call' });
}
