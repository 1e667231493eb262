#!/usr/bin/env node
/**
 * `generate-token` (spec §2): the token issuer under the name the spec gives it. `toolgate token`
 * runs the same code (bin/token-cli.ts); see there for the options, output and exit statuses.
 */
import { runTokenCli } from './token-cli';

process.exitCode = runTokenCli(process.argv.slice(2), 'generate-token');
