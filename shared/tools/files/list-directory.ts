import { promises as fs } from 'node:fs';
import * as nodePath from 'node:path';
import { z } from 'zod';
import { ToolError } from '../../protocol/errors';
import { fsMessage } from '../../workspace/workspace';
import { structuredResult } from '../result';
import { defineTool } from '../tool';

const entryType = (d: import('node:fs').Dirent): 'file' | 'directory' | 'symlink' | 'other' =>
  d.isFile() ? 'file' : d.isDirectory() ? 'directory' : d.isSymbolicLink() ? 'symlink' : 'other';

export const listDirectory = defineTool({
  name: 'list_directory',
  title: 'List directory',
  description: 'List the entries of a directory in the workspace with their type and size (bytes, files only).',
  permission: 'file:list',
  host: 'sandbox',
  input: z.object({ path: z.string().default('.').describe('Directory path; defaults to the workspace root') }),
  output: z.object({
    path: z.string(),
    entries: z.array(z.object({ name: z.string(), type: z.enum(['file', 'directory', 'symlink', 'other']), size: z.number().optional() })),
    truncated: z.boolean(),
  }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async run({ path }, { workspace, limits }) {
    const real = await workspace.resolve(path);
    const shown = workspace.display(real);
    let dirents: import('node:fs').Dirent[];
    try {
      dirents = await fs.readdir(real, { withFileTypes: true });
    } catch (err) {
      throw new ToolError(fsMessage(err, shown));
    }
    dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const kept = dirents.slice(0, limits.maxListEntries);
    const entries = await Promise.all(
      kept.map(async (d) => {
        const type = entryType(d);
        if (type !== 'file') return { name: d.name, type };
        const size = await fs.lstat(nodePath.join(real, d.name)).then((s) => s.size, () => undefined);
        return size === undefined ? { name: d.name, type } : { name: d.name, type, size };
      }),
    );
    const truncated = dirents.length > kept.length;
    const text = entries.map((e) => `[${e.type === 'directory' ? 'DIR' : e.type === 'file' ? 'FILE' : e.type.toUpperCase()}] ${e.name}`).join('\n')
      + (truncated ? `\n… ${dirents.length - kept.length} more entries not shown` : '');
    return structuredResult({ path: shown, entries, truncated }, text);
  },
});
