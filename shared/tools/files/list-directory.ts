import type { Dirent } from 'node:fs';
import { ToolError } from '../../protocol/errors';
import { withDir } from '../../workspace/pinned-dir';
import { fsMessage } from '../../workspace/workspace';
import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { entryType, entryTypeSchema, EntryType } from './entry-type';

const LABEL = { file: 'FILE', directory: 'DIR', symlink: 'LINK', other: 'OTHER' } as const;

interface Entry {
  name: string;
  type: EntryType;
  size?: number;
  modified?: string;
}

export const listDirectory = defineTool({
  name: 'list_directory',
  title: 'List directory',
  description:
    'List the entries of a directory in the workspace, sorted by name, with their type (file, directory, symlink, other). ' +
    'With `details: true`, also the size in bytes of each file and the last-modified time of each entry (one stat per entry: slower on large directories). ' +
    'At most the configured entry limit; `truncated` says more exist.',
  permission: 'file:list',
  host: 'sandbox',
  input: (z) =>
    z.object({
      path: z.string().default('.').describe('Directory path; defaults to the workspace root'),
      details: z
        .boolean()
        .default(false)
        .describe("Also return each file's size in bytes and each entry's last-modified time (ISO 8601); costs one stat per entry"),
    }),
  output: (z) =>
    z.object({
      path: z.string(),
      entries: z.array(
        z.object({
          name: z.string(),
          type: entryTypeSchema(z),
          size: z.number().optional().describe('Files only, with details: true'),
          modified: z.string().optional().describe('With details: true'),
        }),
      ),
      total: z.number().describe('How many entries the directory has'),
      truncated: z.boolean(),
    }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async run({ path, details }, { workspace, limits }) {
    return withDir(await workspace.openDir(path), async (dir) => {
      let dirents: Dirent[];
      try {
        dirents = dir.readdir();
      } catch (err) {
        throw new ToolError(fsMessage(err, dir.shown));
      }
      dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      const kept = dirents.slice(0, limits.maxListEntries);
      // The default is readdir's names and types alone: a stat per entry costs more than the rest
      // of the call (through /proc/self/fd, the race-free way), and most listings need no sizes.
      const entries: Entry[] = kept.map((d) => {
        const type = entryType(d);
        if (!details) return { name: d.name, type };
        try {
          const st = dir.lstat(d.name);
          const modified = st.mtime.toISOString();
          return type === 'file' ? { name: d.name, type, size: st.size, modified } : { name: d.name, type, modified };
        } catch {
          return { name: d.name, type }; // removed since the listing
        }
      });
      const truncated = dirents.length > kept.length;
      const lines = entries.map((e) => `[${LABEL[e.type]}] ${e.name}${describe(e)}`);
      if (truncated) lines.push(`… ${dirents.length - kept.length} more entries not shown (limit ${limits.maxListEntries})`);
      if (entries.length === 0) lines.push(`(${dir.shown} is empty)`);
      return structuredResult({ path: dir.shown, entries, total: dirents.length, truncated }, lines.join('\n'));
    });
  },
});

function describe(e: Entry): string {
  if (e.modified === undefined) return '';
  return e.size !== undefined ? ` (${e.size} bytes, modified ${e.modified})` : ` (modified ${e.modified})`;
}
