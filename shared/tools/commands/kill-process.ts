import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { KILL_SIGNALS } from './process-group';
import { describeProcess, handleSchema, processInfoShape, publishedInfo } from './process-info';

/** Long enough for a process to act on SIGTERM and report its exit in the same answer. */
const WAIT_FOR_EXIT_MS = 1000;

export const killProcess = defineTool({
  name: 'kill_process',
  title: 'Kill process',
  description:
    'Send a signal (default SIGTERM) to a process started by start_process and everything it spawned (its process group), ' +
    'then wait briefly for it to exit. Its output stays readable.',
  permission: 'system:exec',
  host: 'sandbox',
  input: (z) =>
    z.object({
      handle: handleSchema(z),
      signal: z.enum(KILL_SIGNALS).default('SIGTERM'),
    }),
  output: (z) => z.object({ ...processInfoShape(z), signalled: z.boolean().describe('False when it had already exited') }),
  annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
  async run({ handle, signal }, { processes }) {
    const { signalled, info } = await processes.kill(handle, signal, signal === 'SIGSTOP' || signal === 'SIGCONT' ? 0 : WAIT_FOR_EXIT_MS);
    const what = signalled ? `Sent ${signal}` : 'Nothing to signal: it had already exited';
    return structuredResult({ ...publishedInfo(info), signalled }, `${what}. ${describeProcess(info)}`);
  },
});
