/**
 * A spawn that fails for a reason the model cannot act on answers "Could not start …", and its
 * cause reaches the log (inside a sandbox: the agent's stderr, which the executor logs); a reason
 * the sentence names (a missing command) is the model's business only.
 */
import { spawnError } from '../../../shared/tools/commands/spawn-error';
import { LocalToolRunner } from '../../../shared/tools/local-runner';
import { defineTool } from '../../../shared/tools/tool';
import type { AnyTool } from '../../../shared/tools/tool';

function failingTool(err: Error): AnyTool {
  return defineTool({
    name: 'start_thing',
    title: 'Start thing',
    description: 'fails to spawn',
    permission: 'system:exec',
    host: 'sandbox',
    input: (z) => z.object({}),
    annotations: {},
    run: () => Promise.reject(spawnError(err, '/bin/sh')),
  }) as unknown as AnyTool;
}

async function run(err: Error) {
  const logged: Array<{ err: unknown; tool: string }> = [];
  const runner = new LocalToolRunner({
    sandbox: {} as never,
    onUnexpectedError: (e, tool) => logged.push({ err: e, tool }),
  });
  const result = await runner.run(failingTool(err), {}, undefined, undefined as never);
  return { result, logged };
}

it('logs the cause of a spawn failure it cannot explain', async () => {
  const cause = Object.assign(new Error("Cannot find module 'node-pty'"), { code: 'MODULE_NOT_FOUND' });
  const { result, logged } = await run(cause);
  expect(result).toEqual({ content: [{ type: 'text', text: 'Could not start /bin/sh' }], isError: true });
  expect(logged).toEqual([{ err: cause, tool: 'start_thing' }]);
});

it('does not log a failure the message names', async () => {
  const { result, logged } = await run(Object.assign(new Error('spawn /bin/sh ENOENT'), { code: 'ENOENT' }));
  expect(result.content).toEqual([{ type: 'text', text: 'Command not found: /bin/sh' }]);
  expect(logged).toEqual([]);
});
