import { readlinkSync, Stats } from 'node:fs';
import { ToolError } from '../../protocol/errors';
import { withDir } from '../../workspace/pinned-dir';
import { fsMessage, Workspace } from '../../workspace/workspace';
import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { entryType, entryTypeSchema } from './entry-type';

const rwx = (mode: number): string => [0o400, 0o200, 0o100, 0o40, 0o20, 0o10, 0o4, 0o2, 0o1].map((bit, i) => (mode & bit ? 'rwx'[i % 3] : '-')).join('');

export const getFileInfo = defineTool({
  name: 'get_file_info',
  title: 'File info',
  description:
    'Metadata of a path in the workspace: type, size, permissions, times, hard-link count. A symlink is described ' +
    'itself (with its target text), not followed.',
  permission: 'file:list',
  host: 'sandbox',
  input: (z) => z.object({ path: z.string().describe('Path, relative to the workspace root or absolute inside it') }),
  output: (z) =>
    z.object({
      path: z.string(),
      type: entryTypeSchema(z),
      size: z.number(),
      permissions: z.string().describe('e.g. rw-r--r--'),
      mode: z.string().describe('Octal permission bits, e.g. 644'),
      modified: z.string(),
      accessed: z.string(),
      changed: z.string(),
      created: z.string().optional(),
      links: z.number().describe('Hard-link count'),
      symlinkTarget: z.string().optional(),
    }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async run({ path }, { workspace }) {
    // The root has no parent to lstat it in; it is a directory, never a link.
    const { stat, shown, target } =
      workspace.lexical(path) === workspace.root
        ? await withDir(await workspace.openDir('.'), (d) => ({ stat: d.stat(), shown: '.', target: undefined }))
        : await info(workspace, path);
    const type = entryType(stat);
    const out = {
      path: shown,
      type,
      size: stat.size,
      permissions: rwx(stat.mode),
      mode: (stat.mode & 0o7777).toString(8),
      modified: stat.mtime.toISOString(),
      accessed: stat.atime.toISOString(),
      changed: stat.ctime.toISOString(),
      ...(stat.birthtimeMs > 0 ? { created: stat.birthtime.toISOString() } : {}),
      links: stat.nlink,
      ...(target !== undefined ? { symlinkTarget: target } : {}),
    };
    const text = Object.entries(out)
      .map(([k, v]) => `${k}: ${v}`)
      .join('\n');
    return structuredResult(out, text);
  },
});

async function info(workspace: Workspace, path: string): Promise<{ stat: Stats; shown: string; target: string | undefined }> {
  const { dir, name, shown } = await workspace.openParent(path, { followLast: false });
  return withDir(dir, (d) => {
    try {
      const stat = d.lstat(name);
      const target = stat.isSymbolicLink() ? readlinkSync(d.at(name)) : undefined;
      return { stat, shown, target };
    } catch (err) {
      if (err instanceof ToolError) throw err;
      throw new ToolError(fsMessage(err, shown));
    }
  });
}
