#!/usr/bin/env node
/** `toolgate <command>`: the composition root. Reads the environment once, then runs one command. */
import { ConfigError, loadConfig } from '../shared/config';
import { createLogger } from '../shared/log';
import { TOOLGATE_VERSION } from '../shared/version';
import type { Command } from './commands/command';
import { executorCommand } from './commands/executor';
import { revokeCommand } from './commands/revoke';
import { serveCommand } from './commands/serve';
import { shimCommand } from './commands/shim';
import { stdioCommand } from './commands/stdio';
import { tokenCommand } from './commands/token';
import { UsageError } from './flags';

const COMMANDS: Record<string, Command> = {
  serve: serveCommand,
  executor: executorCommand,
  stdio: stdioCommand,
  shim: shimCommand,
  revoke: revokeCommand,
  token: tokenCommand,
};

const USAGE = `toolgate ${TOOLGATE_VERSION} — an MCP tool server (JSON-RPC 2.0) for AI agents

Usage: toolgate <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`)
  .join('\n')}

Run \`toolgate <command> --help\` for a command's options.`;

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  if (name === '--version') {
    process.stdout.write(TOOLGATE_VERSION + '\n');
    return 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    process.stderr.write(`toolgate: unknown command "${name}"\n\n${USAGE}\n`);
    return 2;
  }
  if (command.standalone) return command.standalone(rest);
  if (rest.includes('--help') || rest.includes('-h') || !command.run) {
    process.stdout.write(command.usage + '\n');
    return 0;
  }
  const config = loadConfig();
  const log = createLogger(config.logLevel, 'toolgate', config.logFormat);
  try {
    return await command.run(rest, config, log);
  } finally {
    log.flush();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError || err instanceof ConfigError) process.stderr.write(`toolgate: ${err.message}\n`);
    else process.stderr.write(`toolgate: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  },
);
