import { renameSync } from 'node:fs';
import { ToolError } from '../../protocol/errors';
import { withDir } from '../../workspace/pinned-dir';
import { fsMessage } from '../../workspace/workspace';
import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { lstatOrNone } from './atomic-write';

export const movePath = defineTool({
  name: 'move_path',
  title: 'Move or rename',
  description:
    'Move or rename a file, directory or symlink (the link itself) within the workspace. Fails if the destination exists ' +
    'unless overwrite is true (a directory can only replace an empty directory). Parent directories of the destination are created.',
  permission: 'file:write',
  host: 'sandbox',
  input: (z) =>
    z.object({
      source: z.string().describe('Existing path, relative to the workspace root or absolute inside it'),
      destination: z.string().describe('New path, relative to the workspace root or absolute inside it'),
      overwrite: z.boolean().default(false).describe('Replace an existing destination'),
    }),
  output: (z) => z.object({ source: z.string(), destination: z.string() }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  async run({ source, destination, overwrite }, { workspace }) {
    const from = await workspace.openParent(source, { followLast: false });
    return withDir(from.dir, async (fromDir) => {
      if (!lstatOrNone(fromDir, from.name, from.shown)) throw new ToolError(`No such file or directory: ${from.shown}`);
      const to = await workspace.openParent(destination, { followLast: false, createParents: true });
      return withDir(to.dir, async (toDir) => {
        const existing = lstatOrNone(toDir, to.name, to.shown);
        if (existing && !overwrite) throw new ToolError(`Destination already exists: ${to.shown} (pass overwrite: true to replace it)`);
        try {
          renameSync(fromDir.at(from.name), toDir.at(to.name));
        } catch (err) {
          throw new ToolError(fsMessage(err, `${from.shown} -> ${to.shown}`));
        }
        return structuredResult({ source: from.shown, destination: to.shown }, `Moved ${from.shown} to ${to.shown}`);
      });
    });
  },
});
