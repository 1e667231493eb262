/**
 * The tools a sandbox serves, by name, and the argument parse the Sandbox contract asks of its
 * callers (backend.ts). The executor and stdio parse every call before it reaches a backend (the
 * job handler, the MCP server); anything else that calls a Sandbox directly (tests, benches) parses
 * here first, in the trusted process. The agent across the wall never parses (it loads no zod:
 * executor/agent/protocol.ts).
 */
import { ParsedArguments, parseToolArguments } from '../../shared/tools/arguments';
import { COMMAND_TOOLS } from '../../shared/tools/commands/index';
import { FILE_TOOLS } from '../../shared/tools/files/index';
import { errorResult } from '../../shared/tools/result';
import type { CallSignal } from '../../shared/tools/runner';
import type { AnyTool, ToolResult } from '../../shared/tools/tool';
import type { Sandbox } from './backend';

export const SANDBOX_TOOLS: ReadonlyMap<string, AnyTool> = new Map([...FILE_TOOLS, ...COMMAND_TOOLS].map((t) => [t.name, t]));

/** The parsed arguments of a call to a sandbox tool; undefined for a tool that is not one (the sandbox names it). */
export function parseSandboxArguments(name: string, raw: unknown): ParsedArguments | undefined {
  const tool = SANDBOX_TOOLS.get(name);
  return tool ? parseToolArguments(tool, raw) : undefined;
}

/** A call for a caller that has not parsed `raw`: arguments that fail the schema are an `isError` result naming the field, as at the edge. */
export function callParsing(sandbox: Sandbox, name: string, raw: unknown, signal: CallSignal, onProgress?: (message: string) => void): Promise<ToolResult> {
  const parsed = parseSandboxArguments(name, raw);
  if (parsed && !parsed.ok) return Promise.resolve(errorResult(parsed.message));
  return sandbox.call(name, parsed ? parsed.data : raw, signal, onProgress);
}
