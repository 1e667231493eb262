import type { Dirent } from 'node:fs';
import { z } from 'zod';
import { ToolError } from '../../protocol/errors';
import { withDir } from '../../workspace/pinned-dir';
import { fsMessage } from '../../workspace/workspace';
import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { entryType, entryTypeSchema } from './entry-type';

const LABEL = { file: 'FILE', directory: 'DIR', symlink: 'LINK', other: 'OTHER' } as const;

export const listDirectory = defineTool({
  name: 'list_directory',
  title: 'List directory',
  description:
    'List the entries of a directory in the workspace, sorted by name, with their type (file, directory, symlink, other) ' +
    'and size in bytes for files. At most the configured entry limit; `truncated` says more exist.',
  permission: 'file:list',
  host: 'sandbox',
  input: z.object({ path: z.string().default('.').describe('Directory path; defaults to the workspace root') }),
  output: z.object({
    path: z.string(),
    entries: z.array(z.object({ name: z.string(), type: entryTypeSchema, size: z.number().optional() })),
    total: z.number().describe('How many entries the directory has'),
    truncated: z.boolean(),
  }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async run({ path }, { workspace, limits }) {
    return withDir(await workspace.openDir(path), async (dir) => {
      let dirents: Dirent[];
      try {
        dirents = dir.readdir();
      } catch (err) {
        throw new ToolError(fsMessage(err, dir.shown));
      }
      dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      const kept = dirents.slice(0, limits.maxListEntries);
      const entries = kept.map((d) => {
        const type = entryType(d);
        if (type !== 'file') return { name: d.name, type };
        try {
          return { name: d.name, type, size: dir.lstat(d.name).size };
        } catch {
          return { name: d.name, type }; // removed since the listing
        }
      });
      const truncated = dirents.length > kept.length;
      const lines = entries.map((e) => `[${LABEL[e.type]}] ${e.name}${e.size !== undefined ? ` (${e.size} bytes)` : ''}`);
      if (truncated) lines.push(`… ${dirents.length - kept.length} more entries not shown (limit ${limits.maxListEntries})`);
      if (entries.length === 0) lines.push(`(${dir.shown} is empty)`);
      return structuredResult({ path: dir.shown, entries, total: dirents.length, truncated }, lines.join('\n'));
    });
  },
});
