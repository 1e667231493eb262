/**
 * The one directory walker behind directory_tree, search_files and search_text: depth-first,
 * names sorted, excluded subtrees skipped, a depth cap, and a visitor that can stop the walk.
 * Every directory is entered through its pinned parent with O_NOFOLLOW, so a symlink (or one
 * swapped in mid-walk) is reported as an entry and never walked into.
 */
import { ToolError } from '../../protocol/errors';
import type { PinnedDir } from '../../workspace/workspace';
import { EntryType, entryType, joinShown } from './entry-type';

export interface WalkEntry {
  name: string;
  /** Path relative to the walk's start, `/`-separated. */
  rel: string;
  type: EntryType;
  /** 1 for the start directory's own entries. */
  depth: number;
  /** The directory holding the entry, open while the visitor runs. */
  dir: PinnedDir;
}

export interface WalkOptions {
  maxDepth: number;
  exclude?: (rel: string) => boolean;
  signal: AbortSignal;
}

export interface WalkSummary {
  /** The visitor stopped the walk. */
  stopped: boolean;
  /** Some directory was not entered because of the depth cap. */
  depthLimited: boolean;
  /** Directories that could not be read (permissions, vanished mid-walk). */
  unreadable: number;
}

/** Return `false` to stop the walk. */
export type Visitor = (entry: WalkEntry) => boolean | void | Promise<boolean | void>;

const byName = (a: { name: string }, b: { name: string }): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

export async function walk(start: PinnedDir, options: WalkOptions, visit: Visitor): Promise<WalkSummary> {
  const summary: WalkSummary = { stopped: false, depthLimited: false, unreadable: 0 };

  const walkDir = async (dir: PinnedDir, relDir: string, depth: number): Promise<boolean> => {
    if (options.signal.aborted) throw new ToolError('Cancelled');
    let dirents;
    try {
      dirents = dir.readdir();
    } catch {
      summary.unreadable++;
      return true;
    }
    dirents.sort(byName);
    for (const d of dirents) {
      const rel = relDir === '' ? d.name : `${relDir}/${d.name}`;
      if (options.exclude?.(rel)) continue;
      const type = entryType(d);
      if ((await visit({ name: d.name, rel, type, depth, dir })) === false) return false;
      if (type !== 'directory') continue;
      if (depth >= options.maxDepth) {
        summary.depthLimited = true;
        continue;
      }
      let child: PinnedDir;
      try {
        child = dir.openDir(d.name, joinShown(dir.shown, d.name));
      } catch {
        summary.unreadable++;
        continue;
      }
      try {
        if (!(await walkDir(child, rel, depth + 1))) return false;
      } finally {
        child.close();
      }
    }
    return true;
  };

  summary.stopped = !(await walkDir(start, '', 1));
  return summary;
}
