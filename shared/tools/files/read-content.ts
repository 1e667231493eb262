/**
 * Reading a file for read_file and read_multiple_files: a byte range or the first/last lines,
 * at most `maxBytes`, as UTF-8 text or base64. Without an explicit encoding the bytes decide:
 * valid UTF-8 without NUL bytes is text, anything else base64. A whole PNG/JPEG/GIF/WebP file
 * (recognised by its magic bytes, not its name) is marked with its MIME type.
 */
import { isUtf8 } from 'node:buffer';
import { closeSync, fstatSync } from 'node:fs';
import type { z } from 'zod';
import type { Zod } from '../zod';
import { ToolError } from '../../protocol/errors';
import { isSmallTransfer, readFully, readFullySync } from '../../workspace/fd-io';
import { fsMessage, Workspace } from '../../workspace/workspace';
import { imageMimeType } from './image';
import { headEnd, tailStart, utf8Prefix, utf8Start } from './lines';

export const encodingSchema = (z: Zod) => z.enum(['utf8', 'base64']);

export interface ReadRequest {
  offset?: number;
  length?: number;
  head?: number;
  tail?: number;
  encoding?: 'utf8' | 'base64';
  maxBytes: number;
}

export const readOutcomeSchema = (z: Zod) =>
  z.object({
    path: z.string(),
    content: z.string().describe('The text, or the bytes in base64 (see encoding)'),
    encoding: encodingSchema(z),
    size: z.number().describe('The whole file size in bytes'),
    offset: z.number().describe('Byte offset where the returned part starts'),
    bytesRead: z.number(),
    truncated: z.boolean().describe('The read limit cut the returned part short of what was asked'),
    nextOffset: z.number().optional().describe('Where the rest of the file starts, when some remains after the returned part'),
    mimeType: z.string().optional().describe('Set for a whole PNG/JPEG/GIF/WebP image'),
  });
export type ReadOutcome = z.infer<ReturnType<typeof readOutcomeSchema>>;

function checkRequest(r: ReadRequest): void {
  const lines = r.head !== undefined || r.tail !== undefined;
  if (r.head !== undefined && r.tail !== undefined) throw new ToolError('Give head or tail, not both');
  if (lines && (r.offset !== undefined || r.length !== undefined)) throw new ToolError('head/tail count lines; they cannot be combined with offset/length');
  if (lines && r.encoding === 'base64') throw new ToolError('head/tail read text; they cannot be combined with encoding "base64"');
}

export async function readContent(workspace: Workspace, input: string, r: ReadRequest): Promise<ReadOutcome> {
  checkRequest(r);
  const { fd, shown } = await workspace.openRead(input);
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) throw new ToolError(`Is a directory: ${shown} (use list_directory)`);
    if (!stat.isFile()) throw new ToolError(`Not a regular file: ${shown}`);
    const size = stat.size;
    // Which bytes: a line window picks its own start; a range starts at offset.
    const lineMode = r.head !== undefined || r.tail !== undefined;
    const windowStart = r.tail !== undefined ? Math.max(0, size - r.maxBytes) : Math.min(r.offset ?? 0, size);
    const asked = lineMode ? size - windowStart : Math.min(r.length ?? Infinity, size - windowStart);
    const want = Math.min(asked, r.maxBytes);
    const buf = Buffer.allocUnsafe(want);
    const got = isSmallTransfer(want) ? readFullySync(fd, buf, windowStart) : await readFully(fd, buf, windowStart);
    let bytes = buf.subarray(0, got);
    let start = windowStart;
    let truncated = asked > r.maxBytes;
    if (r.head !== undefined) {
      const end = headEnd(bytes, r.head);
      truncated = end === undefined && windowStart + got < size;
      bytes = end === undefined ? bytes : bytes.subarray(0, end);
    } else if (r.tail !== undefined) {
      const from = tailStart(bytes, r.tail);
      truncated = from === undefined && windowStart > 0;
      const skip = from ?? utf8Start(bytes);
      bytes = bytes.subarray(skip);
      start += skip;
    }
    const cutShort = start + bytes.length < size;
    const mimeType = start === 0 && !cutShort ? imageMimeType(bytes) : undefined;
    const textBytes = cutShort ? bytes.subarray(0, utf8Prefix(bytes)) : bytes;
    const encoding = r.encoding ?? (mimeType === undefined && isUtf8(textBytes) && !textBytes.includes(0) ? 'utf8' : 'base64');
    if (encoding === 'utf8') bytes = textBytes; // never end text in the middle of a character
    const next = start + bytes.length;
    const out: ReadOutcome = {
      path: shown,
      content: bytes.toString(encoding),
      encoding,
      size,
      offset: start,
      bytesRead: bytes.length,
      truncated,
    };
    if (next < size) out.nextOffset = next;
    if (mimeType !== undefined && encoding === 'base64') out.mimeType = mimeType;
    return out;
  } catch (err) {
    if (err instanceof ToolError) throw err;
    throw new ToolError(fsMessage(err, shown));
  } finally {
    closeSync(fd);
  }
}
