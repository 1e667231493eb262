import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { describeProcess, handleSchema, processInfoSchema, publishedInfo } from './process-info';

export const writeProcessInput = defineTool({
  name: 'write_process_input',
  title: 'Write process input',
  description:
    'Write text to the standard input (or terminal) of a process started by start_process. Include "\\n" to end a line. ' +
    '`eof: true` then closes its input (under a pty: sends Ctrl-D).',
  permission: 'system:exec',
  host: 'sandbox',
  input: (z) =>
    z.object({
      handle: handleSchema(z),
      input: z.string().describe('Text to write, sent as UTF-8'),
      eof: z.boolean().default(false).describe('Close the input afterwards'),
    }),
  output: processInfoSchema,
  annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
  async run({ handle, input, eof }, { processes }) {
    const info = processes.write(handle, input, eof);
    return structuredResult(publishedInfo(info), `Wrote ${Buffer.byteLength(input)} bytes${eof ? ' and closed the input' : ''}: ${describeProcess(info)}`);
  },
});
