/**
 * The built `toolgate` (dist/) explains itself: `serve --help` and `executor --help` name every
 * sandbox backend the configuration accepts, so an operator learns about `docker` from the help.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { SANDBOX_BACKENDS } from '../../executor/sandbox/registry';

const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');
const help = async (command: string) =>
  (await promisify(execFile)(process.execPath, [BIN, command, '--help'], { env: { PATH: process.env.PATH ?? '' } })).stdout;

test.each(['serve', 'executor'])('%s --help lists every sandbox backend under TOOLGATE_SANDBOX', async (command) => {
  const text = await help(command);
  const line = /^ +TOOLGATE_SANDBOX +(.*)$/m.exec(text)?.[1] ?? '';
  // Both the backends the code accepts and the three the README documents.
  for (const backend of new Set([...SANDBOX_BACKENDS.ids, 'none', 'bwrap', 'docker'])) expect(line).toMatch(new RegExp(`\\b${backend}\\b`));
});
