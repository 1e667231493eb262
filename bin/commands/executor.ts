/**
 * `toolgate executor`: a worker on the Redis bus. Takes tool calls off the bus, runs them in
 * each tenant's sandbox or here (http_request), publishes their events and
 * writes the audit log. Runs until SIGTERM or SIGINT, then lets running calls finish within
 * TOOLGATE_SHUTDOWN_GRACE_MS, stops every sandbox and exits 0. The sandbox is chosen as
 * `toolgate serve` chooses its embedded one (sandbox-choice.ts): TOOLGATE_SANDBOX if set, else
 * bwrap when it can run here, else `none` with a warning.
 */
import { Executor, startExecutor } from '../../executor/executor';
import { createBus } from '../../shared/bus/index';
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';
import { parseFlags, settingsHelp } from '../flags';
import type { Command } from './command';
import { CONCURRENCY, DATA_DIR, LOG_FORMAT, LOG_LEVEL, NONE_IDENTITY, REDIS_URL, SHARDS, sandboxSetting } from './settings';
import { startWithStrongestSandbox } from './sandbox-choice';

const say = (line: string) => process.stderr.write(`toolgate executor: ${line}\n`);

const EXECUTOR_SETTINGS = [
  REDIS_URL,
  sandboxSetting(
    '(default: bwrap when it can run here, else none, with a warning — as `toolgate serve`;',
    'docker runs TOOLGATE_SANDBOX_IMAGE, see docs/executor.md)',
  ),
  { ...DATA_DIR, help: ['tenant workspaces live in its workspaces/ folder (default ./.toolgate)'] },
  CONCURRENCY,
  SHARDS,
  NONE_IDENTITY,
  LOG_LEVEL,
  LOG_FORMAT,
] as const;

export const EXECUTOR_USAGE = `Usage: toolgate executor [options]

Runs tool calls from the Redis bus (--redis-url or TOOLGATE_REDIS_URL is required, or
TOOLGATE_REDIS_SENTINELS with TOOLGATE_REDIS_SENTINEL_MASTER, or TOOLGATE_REDIS_CLUSTER_NODES).

Options (each sets the environment variable beside it, and wins over it):
${settingsHelp(EXECUTOR_SETTINGS)}

Also configured by the environment only:
  TOOLGATE_SANDBOX_IDLE_MS       an idle tenant sandbox stops after this (default 300000)
  TOOLGATE_MAX_SANDBOXES         live tenant sandboxes at most (default 64)`;

export async function runExecutor(argv: readonly string[], config: Readonly<Config>, log: Logger): Promise<number> {
  parseFlags(argv, { values: [] });
  if (!config.redis) {
    throw new Error(
      'toolgate executor needs --redis-url or TOOLGATE_REDIS_URL (or TOOLGATE_REDIS_SENTINELS / TOOLGATE_REDIS_CLUSTER_NODES); `toolgate serve` runs an embedded executor otherwise',
    );
  }
  const bus = await createBus(config, log);
  let executor: Executor;
  try {
    ({ started: executor } = await startWithStrongestSandbox(config, (chosen) => startExecutor({ config: chosen, bus, log }), say, log));
  } catch (err) {
    await bus.close();
    throw err;
  }
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  log.info('executor stopping');
  await executor.close();
  await bus.close();
  return 0;
}

export const executorCommand: Command = {
  summary: 'run tool calls from the Redis bus (a worker)',
  usage: EXECUTOR_USAGE,
  settings: EXECUTOR_SETTINGS,
  run: runExecutor,
};
