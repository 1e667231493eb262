/**
 * The workspace `toolgate stdio` serves when no --root is given: the current directory, unless
 * that is `/` or the home directory itself. An agent started from there would get every file of
 * the disk (or of the user) with every permission; that must be asked for by name, not fall out
 * of where a process happened to start.
 */
import { realpathSync } from 'node:fs';
import * as os from 'node:os';
import { UsageError } from '../flags';

function real(dir: string): string {
  try {
    return realpathSync(dir);
  } catch {
    return dir;
  }
}

/** The current directory as the default root, or a UsageError when it is too broad to default to. */
export function defaultRoot(cwd: string = process.cwd(), home: string = os.homedir()): string {
  const here = real(cwd);
  const broad = here === '/' ? 'the root directory /' : home !== '' && here === real(home) ? `the home directory ${here}` : undefined;
  if (broad === undefined) return cwd;
  throw new UsageError(
    `no --root given and the current directory is ${broad}: that would serve all of it to the agent. ` +
      `Pass the project directory (--root /path/to/project), or --root ${here} to serve ${here} on purpose.`,
  );
}
