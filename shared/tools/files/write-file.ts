import { ToolError } from '../../protocol/errors';
import { withDir } from '../../workspace/pinned-dir';
import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { appendTo } from './append';
import { atomicWrite } from './atomic-write';
import { encodingSchema } from './read-content';

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The bytes to write, refused before any file is touched when invalid or over the limit. */
export function decodeContent(content: string, encoding: 'utf8' | 'base64', max: number): Buffer {
  // The model can still write it: in parts, each within the limit.
  const tooBig = () =>
    new ToolError(
      `Content is larger than the write limit of ${max} bytes (TOOLGATE_MAX_WRITE_BYTES). Write it in parts of at most ${max} bytes: ` +
        'the first with mode "overwrite" (or "create"), each next one with mode "append"',
    );
  if (encoding === 'utf8') {
    if (Buffer.byteLength(content) > max) throw tooBig();
    return Buffer.from(content, 'utf8');
  }
  const clean = content.replace(/\s+/g, '');
  if (clean.length % 4 === 1 || !BASE64.test(clean)) throw new ToolError('content is not valid base64');
  if (Math.floor((clean.length * 3) / 4) > max + 2) throw tooBig();
  const bytes = Buffer.from(clean, 'base64');
  if (bytes.length > max) throw tooBig();
  return bytes;
}

export const writeFile = defineTool({
  name: 'write_file',
  title: 'Write file',
  description:
    'Write a file in the workspace, creating parent directories. mode "overwrite" (default) replaces the file atomically ' +
    '(a reader sees the old or the new content, never a mix; the permission bits are kept); "create" does the same but ' +
    'fails if the file exists; "append" adds to the end. content is UTF-8 text, or base64 with encoding "base64".',
  permission: 'file:write',
  host: 'sandbox',
  input: (z) =>
    z.object({
      path: z.string().describe('File path, relative to the workspace root or absolute inside it'),
      content: z.string().describe('The content to write'),
      encoding: encodingSchema(z).default('utf8').describe('How content is encoded: "utf8" (default) or "base64"'),
      mode: z.enum(['overwrite', 'append', 'create']).default('overwrite'),
    }),
  output: (z) => z.object({ path: z.string(), bytesWritten: z.number(), mode: z.enum(['overwrite', 'append', 'create']), created: z.boolean() }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  async run({ path, content, encoding, mode }, { workspace, limits }) {
    const bytes = decodeContent(content, encoding, limits.maxWriteBytes);
    const { dir, name, shown } = await workspace.openParent(path, { followLast: true, createParents: true });
    const created = await withDir(dir, (d) =>
      mode === 'append' ? appendTo(d, name, shown, bytes) : atomicWrite(d, name, shown, bytes, { exclusive: mode === 'create' }),
    );
    const size = bytes.length === 1 ? '1 byte' : `${bytes.length} bytes`;
    const text = mode === 'append' ? `Appended ${size} to ${shown}` : created ? `Created ${shown} (${size})` : `Wrote ${size} to ${shown}`;
    return structuredResult({ path: shown, bytesWritten: bytes.length, mode, created }, text);
  },
});
