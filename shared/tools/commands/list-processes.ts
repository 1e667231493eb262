import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { describeProcess, processInfoSchema, publishedInfo } from './process-info';

export const listProcesses = defineTool({
  name: 'list_processes',
  title: 'List processes',
  description: 'List the processes started by start_process in this sandbox, running or exited, with their handles and state.',
  permission: 'system:exec',
  host: 'sandbox',
  input: (z) => z.object({}),
  output: (z) => z.object({ processes: z.array(processInfoSchema(z)) }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async run(_args, { processes }) {
    const list = processes.list();
    return structuredResult({ processes: list.map(publishedInfo) }, list.length === 0 ? 'No processes.' : list.map(describeProcess).join('\n'));
  },
});
