/**
 * The configuration variables the commands also take as flags (bin/flags.ts `SettingFlag`): the
 * ones a person changes when trying or running toolgate. The signing secret is not among them on
 * purpose: a flag's value is visible to every local user in the process list.
 */
import { LOG_FORMATS, LOG_LEVELS } from '../../shared/config';
import type { SettingFlag } from '../flags';

const setting = (flag: string, env: string, value: string, ...help: string[]): SettingFlag => ({ flag, env, value, help });

export const HOST = setting('host', 'TOOLGATE_HOST', 'ADDR', 'address to listen on (default 127.0.0.1; 0.0.0.0: every interface)');
export const PORT = setting('port', 'TOOLGATE_PORT', 'N', 'port to listen on (default 3000)');
export const DATA_DIR = setting('data-dir', 'TOOLGATE_DATA_DIR', 'DIR', 'secret file and tenant workspaces (default ./.toolgate)');
export const REDIS_URL = setting('redis-url', 'TOOLGATE_REDIS_URL', 'URL', 'the BullMQ bus on this Redis (redis:// or rediss://)');
export const LOG_LEVEL = setting('log-level', 'TOOLGATE_LOG_LEVEL', 'LEVEL', `${LOG_LEVELS.join(' | ')} (default info)`);
export const LOG_FORMAT = setting('log-format', 'TOOLGATE_LOG_FORMAT', 'FORMAT', `${LOG_FORMATS.join(' | ')} (default auto: readable on a terminal)`);
export const NONE_IDENTITY = setting('none-identity', 'TOOLGATE_NONE_IDENTITY', 'ID', 'on sandbox none, the one identity served (default: the first to call)');
export const ALLOWED_ORIGINS = setting('allowed-origins', 'TOOLGATE_ALLOWED_ORIGINS', 'LIST', 'browser origins that may call (comma-separated; *: any)');
export const ALLOWED_HOSTS = setting('allowed-hosts', 'TOOLGATE_ALLOWED_HOSTS', 'LIST', 'Host names a loopback-bound gateway accepts besides loopback ones');
export const CONCURRENCY = setting('concurrency', 'TOOLGATE_EXECUTOR_CONCURRENCY', 'N', 'calls run at once (default 16)');
export const SHARDS = setting('shards', 'TOOLGATE_EXECUTOR_SHARDS', 'LIST', 'shards this executor consumes (default all)');

/**
 * TOOLGATE_SANDBOX, whose default differs between commands. Its help names the registered
 * backends, read from the registry only when the help is printed: a gateway on Redis never loads
 * the executor's code.
 */
export const sandboxSetting = (...defaults: string[]): SettingFlag => ({
  flag: 'sandbox',
  env: 'TOOLGATE_SANDBOX',
  value: 'NAME',
  get help() {
    return [`${registeredBackendIds().join(' | ')}: where file and command tools run`, ...defaults];
  },
});

function registeredBackendIds(): readonly string[] {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load, on purpose (above)
  return (require('../../executor/sandbox/registry') as typeof import('../../executor/sandbox/registry')).SANDBOX_BACKENDS.ids;
}
