/**
 * The file tools in-process, through the real MCP server: each call is a JSON-RPC text frame,
 * each reply is parsed back, and every structured result is checked against the tool's published
 * outputSchema with ajv (as the SDK client does), so a result that drifts from its schema fails.
 */
import Ajv from 'ajv';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PERMISSIONS } from '../../../shared/auth/permissions';
import { DEFAULT_LIMITS, ToolLimits } from '../../../shared/limits';
import { createMcpServer } from '../../../shared/mcp/server';
import { InFlight } from '../../../shared/protocol/dispatcher';
import type { ProcessHost } from '../../../shared/tools/commands/process-host';
import { FILE_TOOLS } from '../../../shared/tools/files/index';
import { LocalToolRunner } from '../../../shared/tools/local-runner';
import { ToolRegistry } from '../../../shared/tools/registry';
import type { ToolResult } from '../../../shared/tools/tool';
import { Workspace } from '../../../shared/workspace/workspace';

export interface Harness {
  /** The workspace root (a real path). */
  root: string;
  /** A directory beside the root, outside the workspace. */
  base: string;
  limits: ToolLimits;
  call(name: string, args: Record<string, unknown>): Promise<ToolResult>;
  /** Calls and expects success; returns structuredContent. */
  ok(name: string, args: Record<string, unknown>): Promise<Record<string, any>>;
  /** Calls and expects an isError result; returns its message. */
  fail(name: string, args: Record<string, unknown>): Promise<string>;
  /** Writes a file below the root (test set-up, on the host side). */
  put(rel: string, content: string | Buffer): Promise<string>;
  read(rel: string): Promise<string>;
  close(): Promise<void>;
}

export const textOf = (r: ToolResult): string => r.content.map((c) => (c.type === 'text' ? c.text : `[${c.type}]`)).join('\n');

export async function makeHarness(limits: Partial<ToolLimits> = {}): Promise<Harness> {
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-files-')));
  const root = path.join(base, 'ws');
  await fs.mkdir(root);
  const all: ToolLimits = { ...DEFAULT_LIMITS, ...limits };
  const workspace = await Workspace.open(root, all.maxPathLength);
  const registry = new ToolRegistry(FILE_TOOLS);
  const unexpected: unknown[] = [];
  const runner = new LocalToolRunner({
    // File tools never touch processes; a stub keeps this harness independent of the commands family.
    sandbox: { workspace, limits: all, processes: { closeAll: () => undefined } as unknown as ProcessHost },
    onUnexpectedError: (err) => unexpected.push(err),
  });
  const server = createMcpServer({ registry, runner, limits: { maxDepth: 64, maxBatch: 10 } });
  const caller = { tenant: 'test', permissions: new Set(PERMISSIONS) };
  const inflight = new InFlight();
  const ajv = new Ajv({ strict: false, allErrors: true });
  const validators = new Map(registry.listFor(caller.permissions).tools.map((t) => [t.name, t.outputSchema ? ajv.compile(t.outputSchema) : undefined]));
  let id = 0;

  const call = async (name: string, args: Record<string, unknown>): Promise<ToolResult> => {
    const frame = JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name, arguments: args } });
    const reply = JSON.parse((await server.dispatchText(frame, caller, inflight))!);
    if (unexpected.length > 0) throw unexpected.shift();
    if (reply.error) throw new Error(`JSON-RPC error ${reply.error.code}: ${reply.error.message}`);
    const result = reply.result as ToolResult;
    const validate = validators.get(name);
    if (!result.isError && validate) {
      if (!validate(result.structuredContent)) throw new Error(`${name} result does not match its outputSchema: ${ajv.errorsText(validate.errors)}`);
    }
    return result;
  };

  return {
    root,
    base,
    limits: all,
    call,
    async ok(name, args) {
      const r = await call(name, args);
      if (r.isError) throw new Error(`${name} failed: ${textOf(r)}`);
      return r.structuredContent as Record<string, any>;
    },
    async fail(name, args) {
      const r = await call(name, args);
      if (!r.isError) throw new Error(`${name} succeeded but should have failed: ${textOf(r).slice(0, 300)}`);
      return textOf(r);
    },
    async put(rel, content) {
      const file = path.join(root, rel);
      await fs.mkdir(path.dirname(file), { recursive: true });
      await fs.writeFile(file, content);
      return file;
    },
    read: (rel) => fs.readFile(path.join(root, rel), 'utf8'),
    close: () => fs.rm(base, { recursive: true, force: true }),
  };
}
