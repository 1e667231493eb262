/**
 * The MCP server: lifecycle (`initialize`, `notifications/initialized`, `ping`) and tools
 * (`tools/list`, `tools/call`) on top of the JSON-RPC dispatcher. Stateless by design: every
 * method works without `initialize`, so HTTP callers can send `tools/list` straight away.
 */
import type { Caller } from '../auth/permissions';
import { Dispatcher, DispatcherLimits, MethodHandler, NotificationHandler } from '../protocol/dispatcher';
import { ErrorCode, ProtocolError } from '../protocol/errors';
import type { JsonRpcId, JsonRpcParams } from '../protocol/jsonrpc';
import type { ToolRegistry } from '../tools/registry';
import { errorResult } from '../tools/result';
import type { ToolRunner } from '../tools/runner';
import type { ToolResult } from '../tools/tool';
import { TOOLGATE_VERSION } from '../version';
import { negotiateVersion } from './versions';

export interface McpServerOptions {
  registry: ToolRegistry;
  runner: ToolRunner;
  limits: DispatcherLimits;
  /** Shown to clients in the initialize result. */
  instructions?: string;
  /** Whether permission checks apply (false inside the sandbox agent, whose caller is the trusted executor). */
  enforcePermissions?: boolean;
}

const asObject = (params: JsonRpcParams | undefined): Record<string, unknown> =>
  params === undefined ? {} : Array.isArray(params) ? invalidParams('params must be an object') : params;

function invalidParams(message: string): never {
  throw new ProtocolError(ErrorCode.InvalidParams, message);
}

/** Names the first failing field the way a model can act on: `edits.0.oldText: expected string`. */
export function describeIssues(issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>): string {
  return issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.map(String).join('.') : '(arguments)'}: ${i.message}`)
    .join('; ');
}

export function createMcpServer(options: McpServerOptions): Dispatcher<Caller> {
  const { registry, runner } = options;
  const enforce = options.enforcePermissions ?? true;

  const methods = new Map<string, MethodHandler<Caller>>([
    [
      'initialize',
      (params) => {
        const p = asObject(params);
        const result: Record<string, unknown> = {
          protocolVersion: negotiateVersion(p.protocolVersion),
          capabilities: { tools: { listChanged: false } },
          serverInfo: { name: 'toolgate', version: TOOLGATE_VERSION },
        };
        if (options.instructions) result.instructions = options.instructions;
        return result;
      },
    ],
    ['ping', () => ({})],
    ['tools/list', (_params, { caller }) => registry.listFor(caller.permissions)],
    [
      'tools/call',
      async (params, { caller, signal }): Promise<ToolResult> => {
        const p = asObject(params);
        if (typeof p.name !== 'string') invalidParams('tools/call needs params.name, a string');
        const tool = registry.get(p.name);
        if (!tool) invalidParams(`Unknown tool: ${p.name}`);
        if (enforce && !caller.permissions.has(tool.permission)) {
          throw new ProtocolError(ErrorCode.PermissionDenied, `Permission denied: ${tool.name} needs the ${tool.permission} permission`, {
            tool: tool.name,
            permission: tool.permission,
          });
        }
        const rawArgs = p.arguments ?? {};
        const parsed = tool.input.safeParse(rawArgs);
        if (!parsed.success) return errorResult(`Invalid arguments for ${tool.name}: ${describeIssues(parsed.error.issues)}`);
        return runner.run(tool, parsed.data, caller, signal);
      },
    ],
  ]);

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

  return new Dispatcher(methods, notifications, options.limits);
}
