import type { z } from 'zod';
import { withDir } from '../../workspace/pinned-dir';
import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { entryTypeSchema, joinShown } from './entry-type';
import { globList, globMatcher } from './globs';
import { walk } from './walk';

export const searchFiles = defineTool({
  name: 'search_files',
  title: 'Find files by name',
  description:
    'Find files and directories whose names match a glob, below a directory of the workspace. A pattern without "/" ' +
    'matches names at any depth ("*.ts", "README*"); one with "/" matches the path below the directory ("src/**/*.test.ts"). ' +
    'Symlinks are listed, not followed. Capped by depth, result and time limits (`truncated`).',
  permission: 'file:list',
  host: 'sandbox',
  input: (z) =>
    z.object({
      path: z.string().default('.').describe('Directory to search; defaults to the workspace root'),
      pattern: z.string().min(1).max(1024).describe('Glob matched against names (or relative paths, if it contains "/")'),
      excludePatterns: globList(z).optional(),
      caseSensitive: z.boolean().default(true),
      maxResults: z.number().int().positive().optional().describe('Most results (capped by the server limit)'),
    }),
  output: (z) =>
    z.object({
      path: z.string(),
      matches: z.array(z.object({ path: z.string(), type: entryTypeSchema(z) })),
      truncated: z.boolean(),
      depthLimited: z.boolean(),
    }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async run(args, { workspace, limits, signal }) {
    const isMatch = globMatcher([args.pattern], { nocase: !args.caseSensitive })!;
    const exclude = globMatcher(args.excludePatterns);
    const max = Math.min(args.maxResults ?? limits.maxTreeEntries, limits.maxTreeEntries);
    const deadline = Date.now() + limits.searchTimeoutMs;
    return withDir(await workspace.openDir(args.path), async (dir) => {
      const matches: Array<{ path: string; type: z.infer<ReturnType<typeof entryTypeSchema>> }> = [];
      let truncated = false;
      const summary = await walk(dir, { maxDepth: limits.maxTreeDepth, signal, ...(exclude ? { exclude } : {}) }, (e) => {
        const hit = isMatch(e.rel);
        if (Date.now() > deadline || (hit && matches.length >= max)) {
          truncated = true;
          return false;
        }
        if (hit) matches.push({ path: joinShown(dir.shown, e.rel), type: e.type });
      });
      const lines = matches.map((m) => `${m.path}${m.type === 'directory' ? '/' : ''}`);
      if (lines.length === 0) lines.push(`No names matching ${args.pattern} below ${dir.shown}`);
      if (truncated) lines.push(`… stopped early (result limit ${max} or time limit ${limits.searchTimeoutMs} ms)`);
      return structuredResult({ path: dir.shown, matches, truncated, depthLimited: summary.depthLimited }, lines.join('\n'));
    });
  },
});
