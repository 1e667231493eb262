/**
 * The built `toolgate` (dist/) explains itself: `serve --help` and `executor --help` name every
 * sandbox backend the configuration accepts, so an operator learns about `docker` from the help,
 * and each option that sets a configuration variable names that variable beside it.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { SANDBOX_BACKENDS } from '../../executor/sandbox/registry';
import { executorCommand } from '../../bin/commands/executor';
import { serveCommand } from '../../bin/commands/serve';
import { stdioCommand } from '../../bin/commands/stdio';

const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');
const help = async (command: string) =>
  (await promisify(execFile)(process.execPath, [BIN, command, '--help'], { env: { PATH: process.env.PATH ?? '' } })).stdout;

test.each(['serve', 'executor'])('%s --help lists every sandbox backend under TOOLGATE_SANDBOX', async (command) => {
  const text = await help(command);
  const line = /^ +--sandbox NAME +TOOLGATE_SANDBOX\n +(.*)$/m.exec(text)?.[1] ?? '';
  // Both the backends the code accepts and the three the README documents.
  for (const backend of new Set([...SANDBOX_BACKENDS.ids, 'none', 'bwrap', 'docker'])) expect(line).toMatch(new RegExp(`\\b${backend}\\b`));
});

test.each([
  ['serve', serveCommand.settings],
  ['executor', executorCommand.settings],
  ['stdio', stdioCommand.settings],
])('%s --help names each setting flag beside its variable', async (command, settings) => {
  const text = await help(command);
  expect(settings?.length).toBeGreaterThan(0);
  for (const s of settings ?? []) expect(text).toMatch(new RegExp(`^ +--${s.flag} ${s.value} +${s.env}$`, 'm'));
});

test('serve --help lists --port and --host', async () => {
  expect(serveCommand.settings?.map((s) => s.flag)).toEqual(expect.arrayContaining(['port', 'host', 'data-dir', 'sandbox', 'redis-url']));
});
