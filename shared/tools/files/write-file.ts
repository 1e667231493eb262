import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as nodePath from 'node:path';
import { z } from 'zod';
import { ToolError } from '../../protocol/errors';
import { fsMessage } from '../../workspace/workspace';
import { structuredResult } from '../result';
import { defineTool } from '../tool';

export const writeFile = defineTool({
  name: 'write_file',
  title: 'Write file',
  description: 'Create or overwrite a file in the workspace with UTF-8 text. Atomic: a reader sees the old or the new content, never a mix. Creates parent directories.',
  permission: 'file:write',
  host: 'sandbox',
  input: z.object({
    path: z.string().describe('File path, relative to the workspace root or absolute inside it'),
    content: z.string().describe('The full new content'),
  }),
  output: z.object({ path: z.string(), bytesWritten: z.number() }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  async run({ path, content }, { workspace, limits }) {
    const bytes = Buffer.from(content, 'utf8');
    if (bytes.length > limits.maxWriteBytes) throw new ToolError(`Content is larger than the limit of ${limits.maxWriteBytes} bytes`);
    const real = await workspace.resolve(path);
    const shown = workspace.display(real);
    const dir = nodePath.dirname(real);
    const temp = nodePath.join(dir, `.${nodePath.basename(real)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      await fs.mkdir(dir, { recursive: true });
      // 'wx' = O_CREAT|O_EXCL: never opens an existing file or follows a planted symlink.
      await fs.writeFile(temp, bytes, { flag: 'wx' });
      await fs.rename(temp, real);
    } catch (err) {
      await fs.rm(temp, { force: true }).catch(() => undefined);
      throw new ToolError(fsMessage(err, shown));
    }
    return structuredResult({ path: shown, bytesWritten: bytes.length }, `Wrote ${bytes.length} bytes to ${shown}`);
  },
});
