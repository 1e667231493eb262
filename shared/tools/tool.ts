/**
 * A tool is one file exporting one `Tool`: its name, description, schemas, permission,
 * annotations and the function that runs it. Adding a tool is that file plus one line in
 * `index.ts`. Its schemas are written as functions of `z` and built on first use (zod.ts), so a
 * process that never validates (the sandbox agent) never loads zod.
 */
import type { z } from 'zod';
import type { Permission } from '../auth/permissions';
import type { ToolLimits } from '../limits';
import type { Workspace } from '../workspace/workspace';
import type { ProcessHost } from './commands/process-host';
import type { SecretBroker } from '../secrets/broker';
import type { HttpPolicy } from './http/policy';
import { loadZod, Zod } from './zod';

/** MCP tool annotations: hints for clients, never trusted for security. */
export interface ToolAnnotations {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

export type ContentBlock = { type: 'text'; text: string } | { type: 'image'; data: string; mimeType: string };

/** An MCP CallToolResult. */
export interface ToolResult {
  content: ContentBlock[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/**
 * Where a tool runs. `sandbox` tools (files, commands) run inside the tenant's sandbox agent,
 * which sees only the workspace; `trusted` tools (http_request) run in the tool-running server
 * process (stdio server or executor), which has the network the sandbox lacks.
 */
export type ToolHost = 'sandbox' | 'trusted';

interface BaseContext {
  /** Aborted when the call is cancelled; long work must stop promptly. */
  signal: AbortSignal;
  limits: ToolLimits;
  /**
   * Reports what a long call is doing now (its newest output line, how far a search got), when
   * the caller asked for progress. Cheap to call often: layers above coalesce and pace it.
   */
  progress?: (message: string) => void;
}
/** What a tool inside the sandbox agent may use. */
export interface SandboxContext extends BaseContext {
  workspace: Workspace;
  processes: ProcessHost;
  /** Variables every command of this sandbox starts with (the egress proxy's), under the caller's own. */
  env?: Readonly<Record<string, string>>;
}
/** What a tool in the trusted process may use. */
export interface TrustedContext extends BaseContext {
  http: HttpPolicy;
  /** The caller's identity (the tenant), when the runner was told: whose secrets (and egress policy) apply. */
  tenant?: string;
  /** The executor's secret store (absent where there is none): http_request swaps `{{secret:NAME}}` through it. */
  secrets?: SecretBroker;
}
export interface HostContext {
  sandbox: SandboxContext;
  trusted: TrustedContext;
}

export interface Tool<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType, H extends ToolHost = ToolHost> {
  name: string;
  title?: string;
  description: string;
  permission: Permission;
  host: H;
  input: I;
  /** Present when the tool returns `structuredContent`; published as `outputSchema`. */
  output?: O;
  annotations: ToolAnnotations;
  run(args: z.output<I>, ctx: HostContext[H]): Promise<ToolResult>;
}

/** A tool as its file writes it: each schema a function of `z`, called once, on first use. */
export interface ToolDefinition<I extends z.ZodType, O extends z.ZodType, H extends ToolHost> extends Omit<Tool<I, O, H>, 'input' | 'output'> {
  input: (zod: Zod) => I;
  output?: (zod: Zod) => O;
}

/** Makes a Tool whose `input`/`output` build on first access (keeping the schema types literal). */
export function defineTool<I extends z.ZodType, O extends z.ZodType, H extends ToolHost>(definition: ToolDefinition<I, O, H>): Tool<I, O, H> {
  const { input, output, ...rest } = definition;
  const tool = { ...rest } as Tool<I, O, H>;
  let inputSchema: I | undefined;
  Object.defineProperty(tool, 'input', { enumerable: true, get: () => (inputSchema ??= input(loadZod())) });
  if (output) {
    let outputSchema: O | undefined;
    Object.defineProperty(tool, 'output', { enumerable: true, get: () => (outputSchema ??= output(loadZod())) });
  }
  return tool;
}

/** A tool of either host, as the registry holds it. */
export type AnyTool = Tool<z.ZodType, z.ZodType, 'sandbox'> | Tool<z.ZodType, z.ZodType, 'trusted'>;
