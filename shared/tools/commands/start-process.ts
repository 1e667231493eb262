import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { describeProcess, processInfoSchema, publishedInfo } from './process-info';
import { commandFields, hasOneCommand, ONE_COMMAND, toProcessSpec } from './spawn-spec';

export const startProcess = defineTool({
  name: 'start_process',
  title: 'Start process',
  description:
    'Start a long-running command in the sandbox and return a handle at once. `command` (shell string) or `argv` (exact exec); ' +
    '`pty: true` runs it under a terminal (120×30) for interactive programs. Then use read_process_output, write_process_input, ' +
    'kill_process and list_processes. Output (stdout and stderr interleaved) is kept up to a configured size, oldest bytes dropped first. ' +
    'Processes end with the sandbox.',
  permission: 'system:exec',
  host: 'sandbox',
  input: (z) =>
    z
      .object({
        ...commandFields(z),
        pty: z.boolean().default(false).describe('Run under a pseudo-terminal (for shells, REPLs and other interactive programs)'),
      })
      .refine(hasOneCommand, ONE_COMMAND),
  output: processInfoSchema,
  annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
  async run(args, ctx) {
    const spec = await toProcessSpec(args, ctx, args.pty);
    const info = await ctx.processes.start(spec);
    return structuredResult(publishedInfo(info), `Started ${describeProcess(info)}`);
  },
});
