/**
 * `toolgate executor`: a worker on the Redis bus. Takes tool calls off the bus, runs them in
 * each tenant's sandbox or here (http_request), publishes their events and
 * writes the audit log. Runs until SIGTERM or SIGINT, then lets running calls finish within
 * TOOLGATE_SHUTDOWN_GRACE_MS, stops every sandbox and exits 0. The sandbox is chosen as
 * `toolgate serve` chooses its embedded one (sandbox-choice.ts): TOOLGATE_SANDBOX if set, else
 * bwrap when it can run here, else `none` with a warning.
 */
import { Executor, startExecutor } from '../../executor/executor';
import { SANDBOX_BACKENDS } from '../../executor/sandbox/registry';
import { createBus } from '../../shared/bus/index';
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';
import { parseFlags } from '../flags';
import type { Command } from './command';
import { startWithStrongestSandbox } from './sandbox-choice';

const say = (line: string) => process.stderr.write(`toolgate executor: ${line}\n`);

export const EXECUTOR_USAGE = `Usage: toolgate executor

Runs tool calls from the Redis bus. Configured by the environment only:
  TOOLGATE_REDIS_URL             the bus (required)
  TOOLGATE_SANDBOX               ${SANDBOX_BACKENDS.ids.join(' | ')}: where file and command tools run
                                 (default: bwrap when it can run here, else none, with a warning — as
                                 \`toolgate serve\`; docker runs TOOLGATE_SANDBOX_IMAGE, see docs/executor.md)
  TOOLGATE_DATA_DIR              tenant workspaces live in its workspaces/ folder
  TOOLGATE_EXECUTOR_CONCURRENCY  calls run at once (default 16)
  TOOLGATE_EXECUTOR_SHARDS       shards this executor consumes (default all)
  TOOLGATE_SANDBOX_IDLE_MS       an idle tenant sandbox stops after this (default 300000)
  TOOLGATE_MAX_SANDBOXES         live tenant sandboxes at most (default 64)`;

export async function runExecutor(argv: readonly string[], config: Readonly<Config>, log: Logger): Promise<number> {
  parseFlags(argv, { values: [] });
  if (!config.bus.redisUrl) {
    throw new Error('toolgate executor needs TOOLGATE_REDIS_URL; `toolgate serve` runs an embedded executor otherwise');
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

export const executorCommand: Command = { summary: 'run tool calls from the Redis bus (a worker)', usage: EXECUTOR_USAGE, run: runExecutor };
