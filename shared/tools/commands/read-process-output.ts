import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { handleSchema, processInfoShape, publishedInfo } from './process-info';

const DEFAULT_LENGTH = 64 * 1024;

export const readProcessOutput = defineTool({
  name: 'read_process_output',
  title: 'Read process output',
  description:
    'Read output of a process started by start_process, paged by byte offset. Without `offset` it continues where the previous read ' +
    'ended; `nextOffset` is where to continue. `dropped` > 0 means the oldest output was discarded (the buffer is bounded). ' +
    '`wait_ms` waits for new output (or the exit) before answering. Also says whether it is still running and its exit code.',
  permission: 'system:exec',
  host: 'sandbox',
  input: (z) =>
    z.object({
      handle: handleSchema(z),
      offset: z.number().int().nonnegative().optional().describe('Byte offset to read from (default: where the last read ended)'),
      length: z.number().int().positive().optional().describe('Most bytes to return (default 65536; capped by the output limit)'),
      wait_ms: z
        .number()
        .int()
        .nonnegative()
        .optional()
        .describe('Wait up to this many milliseconds (at most the default command timeout) for output past the offset, or for the exit (default 0)'),
      encoding: z.enum(['utf8', 'base64']).default('utf8').describe('utf8 pages end on whole characters; base64 returns the exact bytes'),
    }),
  output: (z) =>
    z.object({
      ...processInfoShape(z),
      offset: z.number().describe('Where `data` starts'),
      nextOffset: z.number(),
      dropped: z.number().describe('Bytes before `offset` that were asked for but are no longer kept'),
      more: z.boolean().describe('Output already exists past nextOffset'),
      data: z.string(),
      encoding: z.enum(['utf8', 'base64']),
    }),
  annotations: { readOnlyHint: true, idempotentHint: false, openWorldHint: false },
  async run({ handle, offset, length, wait_ms, encoding }, { processes, limits, signal }) {
    const want = Math.min(length ?? DEFAULT_LENGTH, limits.maxOutputBytes);
    if (wait_ms) {
      const from = offset ?? processes.read(handle, undefined, 0, false).offset;
      await processes.waitForOutput(handle, from, Math.min(wait_ms, limits.commandTimeoutMs), signal);
    }
    const page = processes.read(handle, offset, want, encoding === 'utf8');
    const nextOffset = page.offset + page.data.length;
    const data = page.data.toString(encoding);
    const value = {
      ...publishedInfo(page.info),
      offset: page.offset,
      nextOffset,
      dropped: page.dropped,
      more: nextOffset < page.info.outputBytes,
      data,
      encoding,
    };
    const state = page.info.running ? 'running' : page.info.signal !== null ? `killed by ${page.info.signal}` : `exited with code ${page.info.exitCode}`;
    const head = `[${handle} ${state}; bytes ${page.offset}–${nextOffset} of ${page.info.outputBytes}${page.dropped ? `; ${page.dropped} older bytes dropped` : ''}]`;
    return structuredResult(value, `${head}\n${data}`);
  },
});
