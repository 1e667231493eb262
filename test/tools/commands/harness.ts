/**
 * Runs command tools in-process the way the sandbox agent does: arguments through the tool's
 * input schema, a real workspace in a temp dir, a real ProcessTable, and every structured result
 * checked against the tool's output schema.
 */
import { promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DEFAULT_LIMITS, ToolLimits } from '../../../shared/limits';
import { ProcessTable } from '../../../shared/tools/commands/process-table';
import type { SandboxContext, Tool, ToolResult } from '../../../shared/tools/tool';
import { Workspace } from '../../../shared/workspace/workspace';

export interface Harness {
  root: string;
  ctx: SandboxContext;
  processes: ProcessTable;
  call(tool: Tool<any, any, 'sandbox'>, args: unknown, signal?: AbortSignal): Promise<ToolResult & { structuredContent: Record<string, any> }>;
  close(): Promise<void>;
}

export async function harness(limits: Partial<ToolLimits> = {}): Promise<Harness> {
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-cmd-'));
  const workspace = await Workspace.open(tmp);
  const all = { ...DEFAULT_LIMITS, ...limits };
  const processes = new ProcessTable(all);
  const ctx: SandboxContext = { workspace, limits: all, processes, signal: new AbortController().signal };
  return {
    root: workspace.root,
    ctx,
    processes,
    async call(tool, args, signal) {
      const result = await tool.run(tool.input.parse(args), signal ? { ...ctx, signal } : ctx);
      if (!result.isError && tool.output) tool.output.parse(result.structuredContent);
      return result as ToolResult & { structuredContent: Record<string, any> };
    },
    async close() {
      processes.closeAll();
      await fs.rm(tmp, { recursive: true, force: true });
    },
  };
}

/** Alive = exists and is not a zombie (a killed process whose parent has not reaped it yet). */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Polls until `pid` is gone; the kill itself is asynchronous in the kernel. */
export async function waitDead(pid: number, ms = 5000): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (!isAlive(pid)) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return !isAlive(pid);
}

export const pids = (text: string): number[] => (text.match(/\d+/g) ?? []).map(Number);
