import type { Zod } from '../zod';
import { withDir } from '../../workspace/pinned-dir';
import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { EntryType, entryTypeSchema } from './entry-type';
import { globList, globMatcher } from './globs';
import { walk } from './walk';

interface TreeNode {
  name: string;
  type: EntryType;
  children?: TreeNode[];
}
/**
 * A node and its children. A recursive schema would be published with `$ref`, which Gemini's
 * dialect refuses (portable-schema.ts): the children are described in words and published as
 * objects, and their shape is the same as this node's.
 */
function treeNodeSchema(z: Zod) {
  return z.object({
    name: z.string(),
    type: entryTypeSchema(z),
    /** Present on directories that were walked; absent on directories below the depth cap. */
    children: z
      .array(z.looseObject({}))
      .optional()
      .describe('The entries of a directory that was walked, each shaped like this node (name, type, children); absent below the depth cap'),
  });
}

export const directoryTree = defineTool({
  name: 'directory_tree',
  title: 'Directory tree',
  description:
    'The tree of a directory in the workspace, depth-first and sorted. Symlinks are shown, not followed. ' +
    'excludePatterns are globs ("node_modules", "*.log", "build/**"); a name-only pattern matches at any depth. ' +
    'Capped by depth and entry limits: `truncated` / `depthLimited` say when something was left out.',
  permission: 'file:list',
  host: 'sandbox',
  input: (z) =>
    z.object({
      path: z.string().default('.').describe('Directory path; defaults to the workspace root'),
      excludePatterns: globList(z).optional(),
      maxDepth: z.number().int().positive().optional().describe('Levels to descend (capped by the server limit)'),
    }),
  output: (z) => z.object({ path: z.string(), tree: z.array(treeNodeSchema(z)), entries: z.number(), truncated: z.boolean(), depthLimited: z.boolean() }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async run({ path, excludePatterns, maxDepth }, { workspace, limits, signal }) {
    const exclude = globMatcher(excludePatterns);
    const depth = Math.min(maxDepth ?? limits.maxTreeDepth, limits.maxTreeDepth);
    return withDir(await workspace.openDir(path), async (dir) => {
      const tree: TreeNode[] = [];
      const lines: string[] = [];
      const parents = new Map<string, TreeNode[]>([['', tree]]);
      let entries = 0;
      let truncated = false;
      const summary = await walk(dir, { maxDepth: depth, signal, ...(exclude ? { exclude } : {}) }, (e) => {
        if (entries >= limits.maxTreeEntries) {
          truncated = true;
          return false;
        }
        entries++;
        const node: TreeNode = { name: e.name, type: e.type };
        if (e.type === 'directory' && e.depth < depth) parents.set(e.rel, (node.children = []));
        parents.get(e.rel.slice(0, Math.max(0, e.rel.length - e.name.length - 1)))?.push(node);
        lines.push(`${'  '.repeat(e.depth - 1)}${e.name}${e.type === 'directory' ? '/' : e.type === 'symlink' ? ' -> (symlink)' : ''}`);
      });
      if (truncated) lines.push(`… stopped at the limit of ${limits.maxTreeEntries} entries`);
      if (summary.depthLimited) lines.push(`(directories deeper than ${depth} levels are not expanded)`);
      const header = `${dir.shown}/`;
      return structuredResult(
        { path: dir.shown, tree, entries, truncated, depthLimited: summary.depthLimited },
        [header, ...lines.map((l) => `  ${l}`)].join('\n'),
      );
    });
  },
});
