/**
 * What the executor does with one job from the bus. The gateway already checked the call, but
 * the executor trusts nothing it did not check itself (a bug there, or a forged job on a shared
 * Redis, must not run a tool): the job is well-formed, before its deadline and start-by time,
 * names a known tool, carries that tool's permission, and its arguments pass the tool's schema.
 * Then it runs where the tool belongs — sandbox tools in the tenant's sandbox, trusted ones
 * (http_request) here — and is aborted when the caller cancels, the deadline passes, or the
 * executor shuts down.
 */
import type { JobControl, JobHandler, ToolCallJob } from '../shared/bus/bus';
import { MAX_TIMER_MS } from '../shared/bus/call-timer';
import { describeIssues } from '../shared/mcp/server';
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';
import type { ToolRegistry } from '../shared/tools/registry';
import { errorResult } from '../shared/tools/result';
import type { ToolRunner } from '../shared/tools/runner';
import type { AnyTool, ToolResult } from '../shared/tools/tool';

export interface JobHandlerDeps {
  registry: ToolRegistry;
  /** Runs trusted tools in this process. */
  trusted: ToolRunner;
  /** Runs a sandbox tool in the tenant's sandbox (TenantPool.call). */
  sandbox: (tenant: string, tool: string, args: unknown, signal: AbortSignal, onProgress?: (message: string) => void) => Promise<ToolResult>;
  /** Aborted when the executor stops: running jobs end with its reason. */
  shutdown: AbortSignal;
}

const invalidJob = (why: string) => new ProtocolError(ErrorCode.InvalidRequest, `Invalid job: ${why}`);

/** The job's tool, once the job is well-formed, in time and permitted; else a ProtocolError. */
function admit(job: ToolCallJob, registry: ToolRegistry): AnyTool {
  if (typeof job.tenant !== 'string' || job.tenant.length === 0) throw invalidJob('no tenant');
  if (typeof job.tool !== 'string') throw invalidJob('no tool name');
  if (!Array.isArray(job.permissions)) throw invalidJob('no permission list');
  if (!Number.isFinite(job.deadline) || !Number.isFinite(job.startBy)) throw invalidJob('no deadline');
  const now = Date.now();
  // Nobody waits for a job past either time any more: running it could only cause side effects.
  if (now >= job.deadline) throw new ProtocolError(ErrorCode.Timeout, `Timeout: ${job.tool} did not finish before its deadline`);
  if (now > job.startBy) throw new ProtocolError(ErrorCode.Unavailable, 'Unavailable: no executor started the call in time; it did not run');
  const tool = registry.get(job.tool);
  if (!tool) throw new ProtocolError(ErrorCode.InvalidParams, `Unknown tool: ${job.tool}`);
  if (!job.permissions.includes(tool.permission)) {
    throw new ProtocolError(ErrorCode.PermissionDenied, `Permission denied: ${tool.name} needs the ${tool.permission} permission`, {
      tool: tool.name,
      permission: tool.permission,
    });
  }
  return tool;
}

/**
 * The executor side's one deadline timer for `job` (see shared/bus/bus.ts: one owner per side),
 * aborting the job's own control, so a bus that fails to abort cannot let a job run on. The
 * executor's shutdown reaches running jobs through `running`, not a listener per job.
 */
function guard(job: ToolCallJob, control: JobControl, shutdown: AbortSignal, running: Set<JobControl>): () => void {
  const timer = setTimeout(
    () => control.abort(new ProtocolError(ErrorCode.Timeout, `Timeout: ${job.tool} did not finish before its deadline`)),
    Math.min(job.deadline - Date.now(), MAX_TIMER_MS),
  );
  if (shutdown.aborted && !control.signal.aborted) control.abort(shutdown.reason);
  running.add(control);
  return () => {
    clearTimeout(timer);
    running.delete(control);
  };
}

export function createJobHandler(deps: JobHandlerDeps): JobHandler {
  /** Aborts each running job: the executor's shutdown reaches them all through one listener. */
  const running = new Set<JobControl>();
  const onShutdown = () => {
    for (const control of [...running]) control.abort(deps.shutdown.reason);
  };
  deps.shutdown.addEventListener('abort', onShutdown, { once: true });
  return async (job, control, onProgress) => {
    // The shutdown's own reason says a running call may have run; this one never started.
    if (deps.shutdown.aborted) throw new ProtocolError(ErrorCode.Unavailable, 'Unavailable: the executor is shutting down; the call did not run');
    const tool = admit(job, deps.registry);
    const parsed = tool.input.safeParse(job.args ?? {});
    if (!parsed.success) return errorResult(`Invalid arguments for ${tool.name}: ${describeIssues(parsed.error.issues)}`);
    const dispose = guard(job, control, deps.shutdown, running);
    const { signal } = control;
    try {
      if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
      if (tool.host === 'trusted') {
        return await deps.trusted.run(
          tool,
          parsed.data,
          { tenant: job.tenant, permissions: new Set(job.permissions) },
          signal,
          onProgress ? { onProgress } : undefined,
        );
      }
      return await deps.sandbox(job.tenant, tool.name, parsed.data, signal, onProgress);
    } finally {
      dispose();
    }
  };
}
