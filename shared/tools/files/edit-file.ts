import { isUtf8 } from 'node:buffer';
import { closeSync, fstatSync, Stats } from 'node:fs';
import { ToolError } from '../../protocol/errors';
import { readFully } from '../../workspace/fd-io';
import { READ_FLAGS, withDir } from '../../workspace/pinned-dir';
import { fsMessage } from '../../workspace/workspace';
import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { applyEdits } from './apply-edits';
import { atomicWrite } from './atomic-write';

/**
 * diff (19 modules, ~2–6 MiB resident) is needed only once a file is edited: loaded on the first
 * edit, not by every sandbox agent and gateway that merely lists this tool.
 */
let diffModule: typeof import('diff') | undefined;
function loadDiff(): typeof import('diff') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load, on purpose (above)
  diffModule ??= require('diff') as typeof import('diff');
  return diffModule;
}

export const editFile = defineTool({
  name: 'edit_file',
  title: 'Edit file',
  description:
    "Replace exact text in a UTF-8 file. Each edit's oldText must match exactly once (set replaceAll to replace every " +
    'occurrence); edits apply in order; if any fails nothing is written. Returns a unified diff. dryRun shows the diff ' +
    "without writing. The write is atomic and keeps the file's permission bits.",
  permission: 'file:write',
  host: 'sandbox',
  input: (z) =>
    z.object({
      path: z.string().describe('File path, relative to the workspace root or absolute inside it'),
      edits: z
        .array(
          z.object({
            oldText: z.string().describe('Exact text to find (whitespace and indentation included)'),
            newText: z.string().describe('Text to put in its place'),
            replaceAll: z.boolean().optional().describe('Replace every occurrence instead of requiring exactly one'),
          }),
        )
        .min(1),
      dryRun: z.boolean().default(false).describe('Show the diff without writing'),
    }),
  output: (z) =>
    z.object({ path: z.string(), diff: z.string(), diffTruncated: z.boolean(), replacements: z.number(), dryRun: z.boolean(), changed: z.boolean() }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  async run({ path, edits, dryRun }, { workspace, limits }) {
    const { dir, name, shown } = await workspace.openParent(path, { followLast: true });
    return withDir(dir, async (d) => {
      let fd: number;
      try {
        fd = d.openFile(name, READ_FLAGS);
      } catch (err) {
        throw new ToolError(fsMessage(err, shown));
      }
      let stat: Stats;
      let bytes: Buffer;
      try {
        stat = fstatSync(fd);
        if (!stat.isFile()) throw new ToolError(stat.isDirectory() ? `Is a directory: ${shown}` : `Not a regular file: ${shown}`);
        if (stat.size > limits.maxWriteBytes) throw new ToolError(`${shown} is ${stat.size} bytes, over the edit limit of ${limits.maxWriteBytes}`);
        const buf = Buffer.allocUnsafe(stat.size);
        bytes = buf.subarray(0, await readFully(fd, buf, 0));
      } catch (err) {
        if (err instanceof ToolError) throw err;
        throw new ToolError(fsMessage(err, shown));
      } finally {
        closeSync(fd);
      }
      if (!isUtf8(bytes) || bytes.includes(0)) throw new ToolError(`${shown} is not UTF-8 text; edit_file edits text files only`);
      const before = bytes.toString('utf8');
      const { text: after, replacements } = applyEdits(before, edits, shown);
      const full = loadDiff().createTwoFilesPatch(shown, shown, before, after, 'original', 'modified');
      const diffTruncated = full.length > limits.maxReadBytes;
      const diff = diffTruncated ? full.slice(0, limits.maxReadBytes) : full;
      const changed = after !== before;
      if (!dryRun && changed) {
        const out = Buffer.from(after, 'utf8');
        if (out.length > limits.maxWriteBytes) throw new ToolError(`The edited file would exceed the write limit of ${limits.maxWriteBytes} bytes`);
        await atomicWrite(d, name, shown, out, { expect: stat });
      }
      const summary = `${dryRun ? 'Dry run: would make' : 'Made'} ${replacements} replacement(s) in ${shown}${changed ? '' : ' (content unchanged)'}`;
      return structuredResult({ path: shown, diff, diffTruncated, replacements, dryRun, changed }, `${summary}\n\n${diff}`);
    });
  },
});
