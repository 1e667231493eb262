/**
 * The set of tools a server offers. Built once at start-up: it refuses invalid or duplicate
 * names. Each schema is converted to JSON Schema once, on the first `tools/list` (a process never
 * asked for its list never pays for the conversion), and the `tools/list` answer
 * is cached per permission set so the hot path does no schema work.
 */
import type { z } from 'zod';
import type { Permission } from '../auth/permissions';
import { portableSchema } from './portable-schema';
import type { AnyTool } from './tool';
import { loadZod } from './zod';

export const TOOL_NAME = /^[a-z0-9_]{1,64}$/;

/** A tool as `tools/list` publishes it (MCP Tool). */
export interface ToolListing {
  name: string;
  title?: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations: AnyTool['annotations'];
  /** MCP 2025-11-25: every tool may run as a task when the client asks (`params.task`). */
  execution: { taskSupport: 'optional' };
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  // draft-7 without a $schema key: what every MCP client's validator (ajv's default included) reads;
  // in the subset model APIs accept (portable-schema.ts).
  const out = loadZod().toJSONSchema(schema, { target: 'draft-7', io, unrepresentable: 'any' }) as Record<string, unknown>;
  delete out.$schema;
  return portableSchema(out);
}

export class ToolRegistry {
  private readonly byName = new Map<string, AnyTool>();
  private readonly listings = new Map<string, ToolListing>();
  private readonly listCache = new Map<string, { tools: ToolListing[] }>();

  constructor(tools: readonly AnyTool[]) {
    for (const tool of tools) {
      if (!TOOL_NAME.test(tool.name)) {
        throw new Error(`Tool name "${tool.name}" is invalid: it must match ${TOOL_NAME.source}`);
      }
      if (this.byName.has(tool.name)) throw new Error(`Tool "${tool.name}" is registered twice`);
      this.byName.set(tool.name, tool);
    }
  }

  /** The tool as `tools/list` publishes it, converted on first use and kept. */
  private listing(tool: AnyTool): ToolListing {
    let listing = this.listings.get(tool.name);
    if (!listing) {
      listing = {
        name: tool.name,
        description: tool.description,
        inputSchema: jsonSchema(tool.input, 'input'),
        annotations: tool.annotations,
        execution: { taskSupport: 'optional' },
      };
      if (tool.title !== undefined) listing.title = tool.title;
      if (tool.output) listing.outputSchema = jsonSchema(tool.output, 'output');
      this.listings.set(tool.name, listing);
    }
    return listing;
  }

  get(name: string): AnyTool | undefined {
    return this.byName.get(name);
  }

  get names(): string[] {
    return [...this.byName.keys()];
  }

  /** The `tools/list` result for a caller holding these permissions (cached per set). */
  listFor(permissions: ReadonlySet<Permission>): { tools: ToolListing[] } {
    const key = [...permissions].sort().join(',');
    let cached = this.listCache.get(key);
    if (!cached) {
      const tools = [...this.byName.values()].filter((t) => permissions.has(t.permission)).map((t) => this.listing(t));
      cached = { tools };
      this.listCache.set(key, cached);
    }
    return cached;
  }

  /** A registry of the tools that run in one host (e.g. the sandbox agent's share). */
  only(host: AnyTool['host']): ToolRegistry {
    return new ToolRegistry([...this.byName.values()].filter((t) => t.host === host));
  }
}
