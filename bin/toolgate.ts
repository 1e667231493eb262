#!/usr/bin/env node
/**
 * `toolgate <command>`: the composition root. Reads the environment once (with the command's
 * setting flags over it), then runs one command.
 */
import { ConfigError, loadConfig } from '../shared/config';
import { createLogger } from '../shared/log';
import { TOOLGATE_VERSION } from '../shared/version';
import type { Command } from './commands/command';
import { nameSettingFlags, takeSettingFlags, UsageError } from './flags';
import { applyServeNodeFlags } from './node-flags';

/**
 * Each command's module is loaded only when that command runs: every module a process loads stays
 * resident, and a gateway on Redis has no use for the executor, the sandboxes, stdio or the shim
 * (and undici, which the shim loads).
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  serve: async () => (await import('./commands/serve')).serveCommand,
  executor: async () => (await import('./commands/executor')).executorCommand,
  stdio: async () => (await import('./commands/stdio')).stdioCommand,
  shim: async () => (await import('./commands/shim')).shimCommand,
  revoke: async () => (await import('./commands/revoke')).revokeCommand,
  token: async () => (await import('./commands/token')).tokenCommand,
  egress: async () => (await import('./commands/egress')).egressCommand,
  secret: async () => (await import('./commands/secret')).secretCommand,
};

async function usage(): Promise<string> {
  const lines = await Promise.all(Object.entries(COMMANDS).map(async ([name, load]) => `  ${name.padEnd(10)} ${(await load()).summary}`));
  return `toolgate ${TOOLGATE_VERSION} — an MCP tool server (JSON-RPC 2.0) for AI agents

Usage: toolgate <command> [options]

Commands:
${lines.join('\n')}

Run \`toolgate <command> --help\` for a command's options.`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write((await usage()) + '\n');
    return 0;
  }
  if (name === '--version') {
    process.stdout.write(TOOLGATE_VERSION + '\n');
    return 0;
  }
  const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!load) {
    process.stderr.write(`toolgate: unknown command "${name}"\n\n${await usage()}\n`);
    return 2;
  }
  // Before the command loads anything: it may restart this process with serve's node flags.
  if (name === 'serve' && !rest.includes('--help') && !rest.includes('-h')) applyServeNodeFlags(__filename, argv);
  const command = await load();
  if (command.standalone) return command.standalone(rest);
  if (rest.includes('--help') || rest.includes('-h') || !command.run) {
    process.stdout.write(command.usage + '\n');
    return 0;
  }
  const settings = command.settings ?? [];
  const { env: given, rest: args } = takeSettingFlags(rest, settings);
  let config: ReturnType<typeof loadConfig>;
  try {
    // Flags win over the environment; both go through the one config parse.
    config = loadConfig({ ...process.env, ...given });
  } catch (err) {
    throw err instanceof ConfigError ? new ConfigError(nameSettingFlags(err.message, settings, given)) : err;
  }
  const log = createLogger(config.logLevel, 'toolgate', config.logFormat);
  try {
    return await command.run(args, config, log);
  } catch (err) {
    // A setting checked where it is used (the sandbox backend's id) is named as it was given.
    throw err instanceof ConfigError ? new ConfigError(nameSettingFlags(err.message, settings, given)) : err;
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
