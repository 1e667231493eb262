/**
 * The tools a sandbox serves, by name, and the argument parse a backend applies for a caller that
 * has not parsed them itself. The executor and stdio parse every call before it reaches a
 * backend (the job handler, the MCP server), so their backends run with `argumentsParsed` and
 * this is skipped; anything else that calls a Sandbox directly gets the same parse here, in the
 * trusted process. The agent across the wall never parses (it loads no zod: executor/agent/main.ts).
 */
import { ParsedArguments, parseToolArguments } from '../../shared/tools/arguments';
import { COMMAND_TOOLS } from '../../shared/tools/commands/index';
import { FILE_TOOLS } from '../../shared/tools/files/index';
import type { AnyTool } from '../../shared/tools/tool';

export const SANDBOX_TOOLS: ReadonlyMap<string, AnyTool> = new Map([...FILE_TOOLS, ...COMMAND_TOOLS].map((t) => [t.name, t]));

/** The parsed arguments of a call to a sandbox tool; undefined for a tool that is not one (the sandbox names it). */
export function parseSandboxArguments(name: string, raw: unknown): ParsedArguments | undefined {
  const tool = SANDBOX_TOOLS.get(name);
  return tool ? parseToolArguments(tool, raw) : undefined;
}
