/**
 * Whether a directory lies inside a git work tree: `git clean -fdx` there deletes ignored
 * directories, and with the default data directory (./.toolgate) that is the signing secret and
 * every workspace. `toolgate serve` warns about it at start (docs/operating.md).
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';

/** The work tree's top directory when `dir` (absolute) is inside one, else undefined. */
export function gitWorkTreeOf(dir: string): string | undefined {
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    if (existsSync(path.join(at, '.git'))) return at;
    if (path.dirname(at) === at) return undefined;
  }
}
