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
import { Dispatcher, DispatcherLimits, MethodHandler, NotificationHandler, UnexpectedErrorSink } from '../protocol/dispatcher';
import type { CallExtras } from '../tools/runner';
import { ErrorCode, ProtocolError } from '../protocol/errors';
import type { JsonRpcId } from '../protocol/jsonrpc';
import { parseToolArguments } from '../tools/arguments';
import type { ToolRegistry } from '../tools/registry';
import { errorResult } from '../tools/result';
import type { ToolRunner } from '../tools/runner';
import { unknownToolMessage } from '../tools/suggest';
import { metaOf, traceOf } from './envelope';
import { ProgressPace, progressTokenOf, startProgress } from './progress';
import { legacyTask, modernTask, Tasks, TASKS_EXTENSION, TaskSettings } from './tasks';
import { taskMethods } from './task-methods';
import { asObject, declaresTasks, EraHandler, invalidParams, serve, SERVER_INFO } from './era';
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

export { SERVER_INFO };
const DEFAULT_TOOLS_LIST_TTL_MS = 300_000;
export const DEFAULT_PROGRESS_INTERVAL_MS = 2_000;
/** server/discover answers the same to everyone (versions, capabilities, identity): shared caches may keep it. */
const DISCOVER_TTL_MS = 3_600_000;

export { describeIssues } from '../tools/arguments';

export function createMcpServer(options: McpServerOptions): Dispatcher<Caller> {
  const { registry, runner } = options;
  const listTtlMs = options.toolsListTtlMs ?? DEFAULT_TOOLS_LIST_TTL_MS;
  const pace: ProgressPace = options.progress ?? { intervalMs: DEFAULT_PROGRESS_INTERVAL_MS };
  const capabilities = { tools: { listChanged: false } };
  const tasks = options.tasks ? new Tasks(options.tasks, runner) : undefined;
  /** 2025-11-25's tasks capability (task-augmented tools/call, tasks/list, tasks/cancel). */
  const legacyTasksCapability = { list: {}, cancel: {}, requests: { tools: { call: {} } } };
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
    ['tools/call', serve('tools/call', 'both', toolsCall(registry, runner, pace, tasks))],
  ]);

  if (tasks) for (const [name, handler] of taskMethods(tasks)) methods.set(name, handler);

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

/** tools/call: the tool looked up and permitted, its arguments parsed, then run (or made a task). */
function toolsCall(registry: ToolRegistry, runner: ToolRunner, pace: ProgressPace, tasks: Tasks | undefined): EraHandler {
  return async (params, ctx, era): Promise<unknown> => {
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
  };
}
