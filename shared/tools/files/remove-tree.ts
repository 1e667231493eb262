/**
 * Deletes `name` in a pinned directory and, for a directory, everything below it. Each level is
 * opened through its pinned parent with O_NOFOLLOW, and unlink/rmdir never follow a final
 * symlink: a symlink is removed as a link, and one swapped in mid-walk cannot lead outside.
 */
import { rmdirSync, unlinkSync } from 'node:fs';
import { ToolError } from '../../protocol/errors';
import type { PinnedDir } from '../../workspace/workspace';
import { joinShown } from './entry-type';

/** Deeper than this is refused: each level holds a file descriptor open. */
const MAX_DEPTH = 256;

/** Returns how many entries were removed (the target included). */
export function removeTree(parent: PinnedDir, name: string, shown: string, signal: AbortSignal, depth = 0): number {
  const stat = parent.lstat(name);
  if (!stat.isDirectory()) {
    unlinkSync(parent.at(name));
    return 1;
  }
  if (depth >= MAX_DEPTH) throw new ToolError(`Refused: ${shown} is nested more than ${MAX_DEPTH} levels deep`);
  if (signal.aborted) throw new ToolError('Cancelled');
  const dir = parent.openDir(name, shown);
  let removed = 0;
  try {
    for (const entry of dir.readdir()) removed += removeTree(dir, entry.name, joinShown(shown, entry.name), signal, depth + 1);
  } finally {
    dir.close();
  }
  rmdirSync(parent.at(name));
  return removed + 1;
}
