import { promises as fs } from 'node:fs';
import { z } from 'zod';
import { ToolError } from '../../protocol/errors';
import { fsMessage } from '../../workspace/workspace';
import { structuredResult } from '../result';
import { defineTool } from '../tool';

export const readFile = defineTool({
  name: 'read_file',
  title: 'Read file',
  description: 'Read a file in the workspace as UTF-8 text. Reads at most the configured byte limit; `truncated` says when more remains.',
  permission: 'file:read',
  host: 'sandbox',
  input: z.object({
    path: z.string().describe('File path, relative to the workspace root or absolute inside it'),
  }),
  output: z.object({
    path: z.string(),
    content: z.string(),
    size: z.number(),
    truncated: z.boolean(),
  }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async run({ path }, { workspace, limits }) {
    const real = await workspace.resolve(path);
    const shown = workspace.display(real);
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(real, 'r');
    } catch (err) {
      throw new ToolError(fsMessage(err, shown));
    }
    try {
      const stat = await handle.stat();
      if (stat.isDirectory()) throw new ToolError(`Is a directory: ${shown}`);
      const want = Math.min(stat.size, limits.maxReadBytes);
      const buf = Buffer.allocUnsafe(want);
      const { bytesRead } = await handle.read(buf, 0, want, 0);
      const content = buf.toString('utf8', 0, bytesRead);
      return {
        ...structuredResult({ path: shown, content, size: stat.size, truncated: stat.size > bytesRead }),
        content: [{ type: 'text', text: content }],
      };
    } catch (err) {
      if (err instanceof ToolError) throw err;
      throw new ToolError(fsMessage(err, shown));
    } finally {
      await handle.close();
    }
  },
});
