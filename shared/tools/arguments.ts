/**
 * Parses a tool's arguments against its input schema and names what a model must fix. Unknown
 * keys are refused by name: the schemas would drop them silently, so a typo such as `contents`
 * would otherwise surface only as a missing `content` (or, for an optional key, not at all).
 */
import type { AnyTool } from './tool';
import { didYouMean } from './suggest';
import { loadZod } from './zod';

export type ParsedArguments = { ok: true; data: unknown } | { ok: false; message: string };

/** Names the first failing fields the way a model can act on: `edits.0.oldText: expected string`. */
export function describeIssues(issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>): string {
  return issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.map(String).join('.') : '(arguments)'}: ${i.message}`)
    .join('; ');
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The argument keys a tool's schema knows, when its input is an object schema. */
function knownKeys(tool: AnyTool): string[] | undefined {
  return tool.input instanceof loadZod().ZodObject ? Object.keys(tool.input.shape as Record<string, unknown>) : undefined;
}

export function parseToolArguments(tool: AnyTool, raw: unknown): ParsedArguments {
  const problems: string[] = [];
  const known = knownKeys(tool);
  if (known && isPlainObject(raw)) {
    const quote = (s: string) => `\`${s}\``;
    for (const key of Object.keys(raw)
      .filter((k) => !known.includes(k))
      .slice(0, 5)) {
      problems.push(`${quote(key)} is not a known argument of ${tool.name}.${didYouMean(key, known, quote)}`);
    }
  }
  const parsed = tool.input.safeParse(raw);
  if (!parsed.success) problems.push(describeIssues(parsed.error.issues));
  if (problems.length > 0) {
    // The list of known keys goes last: the message still starts `Invalid arguments for TOOL: FIELD`.
    const keys = known && known.length > 0 ? ` (${tool.name} takes: ${known.join(', ')})` : '';
    return { ok: false, message: `Invalid arguments for ${tool.name}: ${problems.join('; ')}${keys}` };
  }
  return { ok: true, data: parsed.data };
}
