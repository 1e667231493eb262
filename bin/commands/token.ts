/**
 * `toolgate token`: `generate-token` under toolgate's own name, so that a token can be issued
 * wherever `toolgate` runs (an unrelated npm package is called `generate-token`). Same code,
 * options, output and exit statuses: bin/token-cli.ts.
 */
import { runTokenCli, tokenUsage } from '../token-cli';
import type { Command } from './command';

const PROGRAM = 'toolgate token';

export const tokenCommand: Command = {
  summary: 'issue an access token (the same as generate-token)',
  usage: tokenUsage(PROGRAM),
  standalone: (argv) => runTokenCli(argv, PROGRAM),
};
