/**
 * The MCP server: tools (`tools/list`, `tools/call`) on top of the JSON-RPC dispatcher, for both
 * protocol eras at once (MCP 2026-07-28 "Versioning", dual-era):
 * - a request carrying the modern `_meta` envelope is served statelessly by 2026-07-28 rules:
 *   envelope checked, `server/discover` available, the methods that revision removed (`ping`)
 *   answered -32601, every result marked `resultType: "complete"` with our identity in `_meta`,
 *   `tools/list` cacheable;
 * - anything else is legacy: `initialize` negotiates a 2024-11-05…2025-11-25 revision, and
 *   every method works without it too (HTTP callers send `tools/list` straight away).
 */
import type { Caller } from '../auth/permissions';
import type { Config } from '../config';
import { CallContext, Dispatcher, DispatcherLimits, MethodHandler, NotificationHandler, UnexpectedErrorSink } from '../protocol/dispatcher';
import type { CallExtras } from '../tools/runner';
import { ErrorCode, ErrorCodeValue, ProtocolError } from '../protocol/errors';
import type { JsonRpcId, JsonRpcParams } from '../protocol/jsonrpc';
import { parseToolArguments } from '../tools/arguments';
import type { ToolRegistry } from '../tools/registry';
import { errorResult } from '../tools/result';
import type { ToolRunner } from '../tools/runner';
import { unknownToolMessage } from '../tools/suggest';
import { TOOLGATE_VERSION } from '../version';
import { META_SERVER_INFO, metaOf, RequestEra, requestEra, traceOf } from './envelope';
import { ProgressPace, progressTokenOf, startProgress } from './progress';
import { legacyTask, modernTask, RELATED_TASK, Tasks, TASKS_EXTENSION, TaskSettings, unknownTask } from './tasks';
import { BadCursor } from '../tasks/task-store';
import { ALL_PROTOCOL_VERSIONS, negotiateVersion } from './versions';

export interface McpServerOptions {
  registry: ToolRegistry;
  runner: ToolRunner;
  limits: DispatcherLimits;
  /** Shown to clients in the initialize and server/discover results. */
  instructions?: string;
  /** How long a modern client may cache `tools/list` (its `ttlMs`); default 5 minutes. */
  toolsListTtlMs?: number;
  /** How progress is paced for calls that ask for it (default: a tick every 2 s, for the edge a client talks to). */
  progress?: ProgressPace;
  /** MCP tasks (both eras); absent: no tasks are offered. */
  tasks?: TaskSettings;
  /** Logs what a caller sees only as "Internal error" (a method that threw something unexpected). */
  onUnexpectedError?: UnexpectedErrorSink;
}

/** The options every server a client talks to (stdio, the gateway) takes from the config. */
export function edgeOptions(config: Readonly<Config>): Pick<McpServerOptions, 'limits' | 'toolsListTtlMs' | 'progress'> {
  return {
    limits: config.protocol,
    toolsListTtlMs: config.protocol.toolsListTtlMs,
    progress: { intervalMs: config.protocol.progressIntervalMs },
  };
}

export const SERVER_INFO = Object.freeze({ name: 'toolgate', version: TOOLGATE_VERSION });
const DEFAULT_TOOLS_LIST_TTL_MS = 300_000;
export const DEFAULT_PROGRESS_INTERVAL_MS = 2_000;
/** server/discover answers the same to everyone (versions, capabilities, identity): shared caches may keep it. */
const DISCOVER_TTL_MS = 3_600_000;

const asObject = (params: JsonRpcParams | undefined): Record<string, unknown> =>
  params === undefined ? {} : Array.isArray(params) ? invalidParams('params must be an object') : params;

function invalidParams(message: string): never {
  throw new ProtocolError(ErrorCode.InvalidParams, message);
}

export { describeIssues } from '../tools/arguments';

/** A 2026-07-28 result: `resultType` and our identity in `_meta`, beside what the method returned. */
function modernResult(result: unknown, extra?: Record<string, unknown>): Record<string, unknown> {
  const body = (typeof result === 'object' && result !== null ? result : {}) as Record<string, unknown>;
  const meta = typeof body._meta === 'object' && body._meta !== null ? (body._meta as Record<string, unknown>) : {};
  // A handler may say what kind of result it is (a task handle: "task"); anything else is complete.
  const resultType = typeof body.resultType === 'string' ? body.resultType : 'complete';
  return { ...body, ...extra, resultType, _meta: { ...meta, [META_SERVER_INFO]: SERVER_INFO } };
}

type EraHandler = (params: JsonRpcParams | undefined, ctx: CallContext<Caller>, era: RequestEra) => unknown;

/** Which era a method exists in. Removed-in-2026 methods are "not found" for modern requests. */
type Eras = 'both' | 'modern' | 'legacy';

export function createMcpServer(options: McpServerOptions): Dispatcher<Caller> {
  const { registry, runner } = options;
  const listTtlMs = options.toolsListTtlMs ?? DEFAULT_TOOLS_LIST_TTL_MS;
  const pace: ProgressPace = options.progress ?? { intervalMs: DEFAULT_PROGRESS_INTERVAL_MS };
  const capabilities = { tools: { listChanged: false } };
  const tasks = options.tasks ? new Tasks(options.tasks, runner) : undefined;
  /** 2025-11-25's tasks capability (task-augmented tools/call, tasks/list, tasks/cancel). */
  const legacyTasksCapability = { list: {}, cancel: {}, requests: { tools: { call: {} } } };
  const declaresTasks = (era: RequestEra): boolean => {
    if (era.era !== 'modern') return false;
    const extensions = era.envelope.capabilities.extensions;
    return typeof extensions === 'object' && extensions !== null && TASKS_EXTENSION in extensions;
  };
  /** The tenant's task named in params, or the unknown-task error (another tenant's included). */
  const taskOf = async (params: JsonRpcParams | undefined, caller: Caller) => {
    const taskId = asObject(params).taskId;
    if (typeof taskId !== 'string') invalidParams('params.taskId must be a string');
    const task = await tasks!.settings.store.get(caller.tenant, taskId);
    if (!task) throw unknownTask(taskId);
    return task;
  };
  const requireTasks = (era: RequestEra) => {
    if (era.era === 'modern' && !declaresTasks(era)) {
      throw new ProtocolError(
        ErrorCode.MissingRequiredClientCapability,
        `Missing required client capability: declare the ${TASKS_EXTENSION} extension to use tasks`,
        {
          requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
        },
      );
    }
  };

  /**
   * Wraps a handler with the era rules: envelope checked, method offered in that era, result
   * shaped. Not `async`: a legacy result (or its promise) is handed on as it is, without a promise
   * and three microtask turns more per call; a throw here reaches the dispatcher like a rejection.
   */
  const serve =
    (method: string, eras: Eras, handle: EraHandler): MethodHandler<Caller> =>
    (params, ctx) => {
      const era = requestEra(method, params);
      if (eras !== 'both' && era.era !== eras) {
        const why = era.era === 'modern' ? 'MCP 2026-07-28 removed it' : 'it belongs to MCP 2026-07-28 and needs the modern _meta envelope';
        throw new ProtocolError(ErrorCode.MethodNotFound, `Method not found: ${method} (${why})`);
      }
      const result = handle(params, ctx, era);
      return era.era === 'modern' ? Promise.resolve(result).then((r) => modernResult(r)) : result;
    };

  const methods = new Map<string, MethodHandler<Caller>>([
    [
      // Always legacy: `initialize` is how a client chooses the legacy era, whatever else it sends.
      'initialize',
      (params) => {
        const p = asObject(params);
        const protocolVersion = negotiateVersion(p.protocolVersion);
        const result: Record<string, unknown> = {
          protocolVersion,
          // Tasks exist from 2025-11-25 on.
          capabilities: tasks && protocolVersion === '2025-11-25' ? { ...capabilities, tasks: legacyTasksCapability } : capabilities,
          serverInfo: SERVER_INFO,
        };
        if (options.instructions) result.instructions = options.instructions;
        return result;
      },
    ],
    ['ping', serve('ping', 'legacy', () => ({}))],
    [
      'server/discover',
      serve('server/discover', 'modern', () => ({
        supportedVersions: [...ALL_PROTOCOL_VERSIONS],
        // The tasks extension's settings object is exactly {} (clients check that it is empty).
        capabilities: { ...capabilities, extensions: tasks ? { [TASKS_EXTENSION]: {} } : {} },
        ...(options.instructions ? { instructions: options.instructions } : {}),
        ttlMs: DISCOVER_TTL_MS,
        cacheScope: 'public',
      })),
    ],
    [
      'tools/list',
      serve('tools/list', 'both', (_params, { caller }, era) => {
        const listing = registry.listFor(caller.permissions);
        // It varies by token (permissions): only the caller's own cache may keep it.
        return era.era === 'modern' ? { ...listing, ttlMs: listTtlMs, cacheScope: 'private' } : listing;
      }),
    ],
    [
      'tools/call',
      serve('tools/call', 'both', async (params, ctx, era): Promise<unknown> => {
        const { caller, notify } = ctx;
        const p = asObject(params);
        if (typeof p.name !== 'string') invalidParams('tools/call needs params.name, a string');
        const tool = registry.get(p.name);
        if (!tool)
          invalidParams(
            unknownToolMessage(
              p.name,
              registry.listFor(caller.permissions).tools.map((t) => t.name),
            ),
          );
        if (!caller.permissions.has(tool.permission)) {
          throw new ProtocolError(ErrorCode.PermissionDenied, `Permission denied: ${tool.name} needs the ${tool.permission} permission`, {
            tool: tool.name,
            permission: tool.permission,
          });
        }
        const rawArgs = p.arguments ?? {};
        const parsed = parseToolArguments(tool, rawArgs);
        if (!parsed.ok) return errorResult(parsed.message);
        const extras: CallExtras = {};
        const trace = traceOf(params);
        if (trace) extras.trace = trace;
        const token = progressTokenOf(metaOf(params));
        const reporter = token !== undefined && notify ? startProgress(notify, token, pace, tool.name) : undefined;
        if (reporter) extras.onProgress = (message) => reporter.update(message);
        try {
          const taskParam = era.era === 'legacy' && tasks && typeof p.task === 'object' && p.task !== null ? (p.task as { ttl?: unknown }) : undefined;
          if (tasks && (taskParam || declaresTasks(era))) {
            const ttl = typeof taskParam?.ttl === 'number' && taskParam.ttl > 0 ? taskParam.ttl : undefined;
            const outcome = await tasks.call(taskParam ? 'now' : 'late', tool, parsed.data, caller, ctx.signal, extras, ttl);
            if ('result' in outcome) return outcome.result;
            return taskParam ? { task: legacyTask(outcome.task) } : { ...modernTask(outcome.task, false), resultType: 'task' };
          }
          // The context itself: its signal is made only if the runner or the tool reads it.
          return await runner.run(tool, parsed.data, caller, ctx, extras);
        } finally {
          reporter?.stop();
        }
      }),
    ],
  ]);

  if (tasks) {
    methods.set(
      'tasks/get',
      serve('tasks/get', 'both', async (params, { caller }, era) => {
        requireTasks(era);
        const task = await taskOf(params, caller);
        return era.era === 'modern' ? modernTask(task, true) : legacyTask(task);
      }),
    );
    methods.set(
      'tasks/cancel',
      serve('tasks/cancel', 'both', async (params, { caller }, era) => {
        requireTasks(era);
        const task = await taskOf(params, caller);
        if (era.era === 'legacy' && task.status !== 'working') invalidParams(`Cannot cancel task ${task.taskId}: it is already ${task.status}`);
        const done = await tasks.cancel(caller.tenant, task.taskId);
        if (!done) throw unknownTask(task.taskId);
        return era.era === 'modern' ? {} : legacyTask(done.after);
      }),
    );
    // 2026-07-28: input for a task that asked for it. toolgate's tools never ask, so there is
    // nothing to route; the update is acknowledged once the task is known to be the caller's.
    methods.set(
      'tasks/update',
      serve('tasks/update', 'modern', async (params, { caller }, era) => {
        requireTasks(era);
        await taskOf(params, caller);
        return {};
      }),
    );
    methods.set(
      'tasks/result',
      serve('tasks/result', 'legacy', async (params, { caller, signal }) => {
        const task = await tasks.ended(caller.tenant, (await taskOf(params, caller)).taskId, signal);
        const related = { [RELATED_TASK]: { taskId: task.taskId } };
        if (task.status === 'completed' && task.result) return { ...task.result, _meta: { ...related } };
        if (task.status === 'failed' && task.error) {
          const data = typeof task.error.data === 'object' && task.error.data !== null ? (task.error.data as Record<string, unknown>) : undefined;
          throw new ProtocolError(task.error.code as ErrorCodeValue, task.error.message, data);
        }
        throw new ProtocolError(ErrorCode.Cancelled, `Task ${task.taskId} was cancelled`, { taskId: task.taskId });
      }),
    );
    methods.set(
      'tasks/list',
      serve('tasks/list', 'legacy', async (params, { caller }) => {
        const cursor = asObject(params).cursor;
        if (cursor !== undefined && typeof cursor !== 'string') invalidParams('params.cursor must be a string');
        try {
          const page = await tasks.settings.store.list(caller.tenant, cursor, 50);
          return { tasks: page.tasks.map(legacyTask), ...(page.nextCursor !== undefined ? { nextCursor: page.nextCursor } : {}) };
        } catch (err) {
          if (err instanceof BadCursor) invalidParams('Invalid cursor');
          throw err;
        }
      }),
    );
  }

  const notifications = new Map<string, NotificationHandler<Caller>>([
    ['notifications/initialized', () => undefined],
    [
      'notifications/cancelled',
      (params, { inflight }) => {
        if (params === undefined || Array.isArray(params)) return;
        const id = params.requestId as JsonRpcId;
        if (typeof id === 'string' || typeof id === 'number') {
          inflight.cancel(id, typeof params.reason === 'string' ? params.reason : 'cancelled by the client');
        }
      },
    ],
  ]);

  return new Dispatcher(methods, notifications, options.limits, options.onUnexpectedError);
}
