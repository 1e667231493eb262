import type { z } from 'zod';
import type { Zod } from '../zod';
import { ToolError } from '../../protocol/errors';
import { defineTool } from '../tool';
import { structuredResult } from '../result';
import { readContent, readOutcomeSchema } from './read-content';
import { partNote } from './read-file';

const fileResult = (z: Zod) => z.union([readOutcomeSchema(z), z.object({ path: z.string(), error: z.string() })]);

export const readMultipleFiles = defineTool({
  name: 'read_multiple_files',
  title: 'Read multiple files',
  description:
    'Read several files at once (text as UTF-8, binary and images as base64). A file that fails to read gets an `error` ' +
    'entry and does not fail the others. All files together share the read byte limit, in the order given.',
  permission: 'file:read',
  host: 'sandbox',
  input: (z) =>
    z.object({
      paths: z.array(z.string()).min(1).describe('File paths, relative to the workspace root or absolute inside it'),
    }),
  output: (z) => z.object({ files: z.array(fileResult(z)), truncated: z.boolean() }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async run({ paths }, { workspace, limits, signal }) {
    if (paths.length > limits.maxMultipleFiles) {
      throw new ToolError(`Too many paths: ${paths.length}; read_multiple_files takes at most ${limits.maxMultipleFiles}`);
    }
    let budget = limits.maxReadBytes;
    const files: z.infer<ReturnType<typeof fileResult>>[] = [];
    const text: string[] = [];
    for (const p of paths) {
      if (signal.aborted) throw new ToolError('Cancelled');
      try {
        const r = await readContent(workspace, p, { maxBytes: budget });
        budget -= r.bytesRead;
        files.push(r);
        const note = partNote(r);
        text.push(
          `--- ${r.path}${r.encoding === 'base64' ? ` (base64${r.mimeType ? `, ${r.mimeType}` : ''})` : ''} ---\n${r.content}${note ? `\n${note}` : ''}`,
        );
      } catch (err) {
        if (!(err instanceof ToolError)) throw err;
        files.push({ path: p, error: err.message });
        text.push(`--- ${p} ---\nError: ${err.message}`);
      }
    }
    const truncated = files.some((f) => 'truncated' in f && f.truncated);
    return structuredResult({ files, truncated }, text.join('\n\n'));
  },
});
