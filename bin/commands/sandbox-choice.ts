/**
 * The sandbox an executor runs, whether `toolgate serve` embeds it or `toolgate executor` runs
 * it on Redis — one rule for both: an explicit TOOLGATE_SANDBOX is used as is (and fails
 * start-up if it cannot run); otherwise bubblewrap when it can run here, else `none`, announced
 * loudly. Docker only when asked for: it needs an image built beforehand.
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';

function onPath(file: string): boolean {
  return ['/usr/bin', '/bin', '/usr/local/bin', '/usr/sbin'].some((dir) => existsSync(path.join(dir, file)));
}

/** Whether bubblewrap is worth trying here: it needs root (to drop to per-tenant uids) and its tools. */
const bwrapCandidate = (): boolean => process.getuid?.() === 0 && ['bwrap', 'setpriv', 'prlimit'].every(onPath);

export interface SandboxChoice<T> {
  started: T;
  sandbox: string;
}

/**
 * Starts an executor with the strongest sandbox available. `start` starts one with the config
 * given (and throws if its sandbox cannot run); `say` writes a line for a person (stderr).
 */
export async function startWithStrongestSandbox<T>(
  config: Readonly<Config>,
  start: (config: Readonly<Config>) => Promise<T>,
  say: (line: string) => void,
  log: Logger,
): Promise<SandboxChoice<T>> {
  const withSandbox = (sandbox: string) => Object.freeze({ ...config, sandbox, sandboxExplicit: true });
  const oneIdentity = config.executor.noneIdentity
    ? `"${config.executor.noneIdentity}" (TOOLGATE_NONE_IDENTITY)`
    : 'the first that calls a tool (or set TOOLGATE_NONE_IDENTITY)';
  if (config.sandboxExplicit) {
    if (config.sandbox === 'none') say(`sandbox "none" serves ONE identity: ${oneIdentity}; every other identity is refused.`);
    return { started: await start(config), sandbox: config.sandbox };
  }
  let why = 'bubblewrap needs root and the bwrap, setpriv and prlimit commands (Debian: bubblewrap, util-linux)';
  if (bwrapCandidate()) {
    try {
      return { started: await start(withSandbox('bwrap')), sandbox: 'bwrap' };
    } catch (err) {
      why = `bubblewrap cannot run here: ${err instanceof Error ? err.message : String(err)}`;
    }
  }
  say(`WARNING: no isolating sandbox is available (${why}).`);
  say('WARNING: tools run with sandbox "none": as this user, with no wall between tenants. Set TOOLGATE_SANDBOX to choose a backend explicitly.');
  say(`WARNING: so this server serves ONE identity: ${oneIdentity}; every other identity is refused.`);
  log.warn({ reason: why }, 'no isolating sandbox available; using sandbox "none"');
  return { started: await start(withSandbox('none')), sandbox: 'none' };
}
