import { rmdirSync, unlinkSync } from 'node:fs';
import { ToolError } from '../../protocol/errors';
import { withDir } from '../../workspace/pinned-dir';
import { fsMessage } from '../../workspace/workspace';
import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { entryType, entryTypeSchema } from './entry-type';
import { removeTree } from './remove-tree';

export const deletePath = defineTool({
  name: 'delete_path',
  title: 'Delete path',
  description:
    'Delete a file, a symlink (the link itself, never its target) or a directory in the workspace. A non-empty ' +
    'directory needs recursive: true. The workspace root itself cannot be deleted.',
  permission: 'file:write',
  host: 'sandbox',
  input: (z) =>
    z.object({
      path: z.string().describe('Path, relative to the workspace root or absolute inside it'),
      recursive: z.boolean().default(false).describe('Delete a directory with everything in it'),
    }),
  output: (z) => z.object({ path: z.string(), type: entryTypeSchema(z), removed: z.number().describe('Entries removed, the path itself included') }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  async run({ path, recursive }, { workspace, signal }) {
    const { dir, name, shown } = await workspace.openParent(path, { followLast: false });
    return withDir(dir, async (d) => {
      try {
        const type = entryType(d.lstat(name));
        let removed = 1;
        if (type !== 'directory') unlinkSync(d.at(name));
        else if (recursive) removed = removeTree(d, name, shown, signal);
        else rmdirSync(d.at(name));
        return structuredResult({ path: shown, type, removed }, `Deleted ${type} ${shown}${removed > 1 ? ` (${removed} entries)` : ''}`);
      } catch (err) {
        if (err instanceof ToolError) throw err;
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOTEMPTY' || code === 'EEXIST')
          throw new ToolError(`Directory not empty: ${shown}; pass recursive: true to delete it with its contents`);
        throw new ToolError(fsMessage(err, shown));
      }
    });
  },
});
