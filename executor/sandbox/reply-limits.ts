/**
 * How large a reply from a sandbox agent may be, derived from the tool limits the agent enforces:
 * nothing a well-behaved agent sends can exceed these, so anything that does is a violation
 * (agent-client.ts), not a big result.
 *
 * - Bytes: the largest payload a tool returns (read_file / read_multiple_files: maxReadBytes in
 *   total; run_command: two streams of maxOutputBytes; listings and trees: entries of at most a
 *   name and a few fields; search_text: short excerpts per match), twice (a result carries it in
 *   `content` and in `structuredContent`), each byte as up to six in JSON (`\u0000`), plus 1 MiB
 *   for the envelope. Defaults: 25 MiB.
 * - Values (arrays, objects, strings, numbers…): 32 per listed entry at the largest count a tool
 *   may list, plus 1024. Defaults: ~65 Ki. A frame of `[{},{},…]` within the byte cap would
 *   otherwise be millions of objects.
 */
import type { ToolLimits } from '../../shared/limits';

const KIB = 1024;
const MIB = 1024 * KIB;
/** Bytes per listed entry: a name (at most 255 bytes, NAME_MAX) and its fields. */
const ENTRY_BYTES = KIB;
/** JSON values per listed entry (its object, fields and their values). */
const ENTRY_VALUES = 32;

export interface ReplyLimits {
  maxFrameBytes: number;
  maxValues: number;
}

export function agentReplyLimits(limits: ToolLimits): ReplyLimits {
  const entries = Math.max(limits.maxTreeEntries, limits.maxListEntries, limits.maxSearchResults, limits.maxMultipleFiles, limits.maxProcesses);
  const payload = Math.max(limits.maxReadBytes, 2 * limits.maxOutputBytes, entries * ENTRY_BYTES);
  return { maxFrameBytes: 2 * 6 * payload + MIB, maxValues: ENTRY_VALUES * entries + 1024 };
}
