import { closeSync, fstatSync } from 'node:fs';
import { ToolError } from '../../protocol/errors';
import { readFully } from '../../workspace/fd-io';
import { READ_FLAGS, withDir } from '../../workspace/pinned-dir';
import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { joinShown } from './entry-type';
import { globList, globMatcher } from './globs';
import { SearchTimeout, TextMatcher } from './text-matcher';
import { walk, WalkEntry } from './walk';

/** Longest line excerpt returned per match. */
const EXCERPT = 240;

function excerpt(text: string, column: number): string {
  if (text.length <= EXCERPT) return text;
  const from = Math.max(0, Math.min(column - 1 - 60, text.length - EXCERPT));
  return `${from > 0 ? '…' : ''}${text.slice(from, from + EXCERPT)}${from + EXCERPT < text.length ? '…' : ''}`;
}

/** The file's text, or undefined when it is skipped (not a regular file, too large, binary). */
async function readForSearch(e: WalkEntry, maxBytes: number): Promise<string | undefined> {
  let fd: number;
  try {
    fd = e.dir.openFile(e.name, READ_FLAGS);
  } catch {
    return undefined;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.size > maxBytes) return undefined;
    const buf = Buffer.allocUnsafe(stat.size);
    const bytes = buf.subarray(0, await readFully(fd, buf, 0));
    return bytes.subarray(0, 8192).includes(0) ? undefined : bytes.toString('utf8');
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

export const searchText = defineTool({
  name: 'search_text',
  title: 'Search file contents',
  description:
    'Search the text of files below a directory of the workspace for a string (or a JavaScript regular expression with ' +
    'regex: true); one match per line, as path:line:column. Case-insensitive unless the query has an uppercase letter ' +
    '(or caseSensitive is given). include: name globs of files to search ("*.ts"). Binary and over-size files are skipped. ' +
    'Capped by result, depth and time limits (`truncated`).',
  permission: 'file:read',
  host: 'sandbox',
  input: (z) =>
    z.object({
      path: z.string().default('.').describe('Directory to search; defaults to the workspace root'),
      query: z.string().min(1).max(4096),
      regex: z.boolean().default(false),
      caseSensitive: z.boolean().optional(),
      include: z
        .union([z.string().min(1).max(1024), globList(z)])
        .optional()
        .describe('Glob(s) of file names to search'),
      excludePatterns: globList(z).optional(),
      maxResults: z.number().int().positive().optional().describe('Most matches (capped by the server limit)'),
    }),
  output: (z) =>
    z.object({
      path: z.string(),
      matches: z.array(z.object({ path: z.string(), line: z.number(), column: z.number(), text: z.string() })),
      truncated: z.boolean(),
      filesSearched: z.number(),
      filesSkipped: z.number().describe('Binary, over-size or unreadable files'),
    }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async run(args, { workspace, limits, signal }) {
    const caseSensitive = args.caseSensitive ?? /\p{Lu}/u.test(args.query);
    const matcher = new TextMatcher(args.query, { regex: args.regex, caseSensitive });
    const include = globMatcher(typeof args.include === 'string' ? [args.include] : args.include);
    const exclude = globMatcher(args.excludePatterns);
    const max = Math.min(args.maxResults ?? limits.maxSearchResults, limits.maxSearchResults);
    const deadline = Date.now() + limits.searchTimeoutMs;
    return withDir(await workspace.openDir(args.path), async (dir) => {
      const matches: Array<{ path: string; line: number; column: number; text: string }> = [];
      let truncated = false;
      let filesSearched = 0;
      let filesSkipped = 0;
      await walk(dir, { maxDepth: limits.maxTreeDepth, signal, ...(exclude ? { exclude } : {}) }, async (e) => {
        if (e.type !== 'file' || (include && !include(e.rel))) return;
        if (matches.length >= max || Date.now() >= deadline) {
          truncated = true;
          return false;
        }
        const text = await readForSearch(e, limits.maxSearchFileBytes);
        if (text === undefined) {
          filesSkipped++;
          return;
        }
        filesSearched++;
        try {
          for (const m of matcher.match(text, max - matches.length, deadline - Date.now())) {
            matches.push({ path: joinShown(dir.shown, e.rel), line: m.line, column: m.column, text: excerpt(m.text, m.column) });
          }
        } catch (err) {
          if (!(err instanceof SearchTimeout)) throw new ToolError('search_text failed while matching');
          truncated = true;
          return false;
        }
      });
      const lines = matches.map((m) => `${m.path}:${m.line}:${m.column}: ${m.text}`);
      if (lines.length === 0) lines.push(`No matches for ${JSON.stringify(args.query)} below ${dir.shown}`);
      if (truncated) lines.push(`… stopped early (result limit ${max} or time limit ${limits.searchTimeoutMs} ms)`);
      lines.push(`(${filesSearched} files searched, ${filesSkipped} skipped)`);
      return structuredResult({ path: dir.shown, matches, truncated, filesSearched, filesSkipped }, lines.join('\n'));
    });
  },
});
