/**
 * Writing a file's whole content atomically inside a pinned directory: the bytes go to a fresh
 * temp file beside the target (O_CREAT|O_EXCL|O_NOFOLLOW, so nothing planted there is opened),
 * which then replaces the target by rename. rename(2) replaces a symlink or a hard link at the
 * target rather than writing through it, so no other name (inside or outside) ever changes.
 * Readers see the old or the new content, never a mix. No fsync: atomic for readers, not
 * guaranteed durable across a power cut.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fchmodSync, linkSync, renameSync, Stats, unlinkSync } from 'node:fs';
import { ToolError } from '../../protocol/errors';
import { writeFully } from '../../workspace/fd-io';
import { fsMessage, PinnedDir } from '../../workspace/workspace';

const { O_WRONLY, O_CREAT, O_EXCL } = constants;
const code = (err: unknown): string | undefined => (err as NodeJS.ErrnoException).code;

export interface AtomicWriteOptions {
  /** Fail if the target exists (write_file mode "create"). */
  exclusive?: boolean;
  /** Fail if the target is no longer this file (edit_file: it changed since it was read). */
  expect?: Stats;
}

/** The target's lstat, or undefined when it does not exist. */
export function lstatOrNone(dir: PinnedDir, name: string, shown: string): Stats | undefined {
  try {
    return dir.lstat(name);
  } catch (err) {
    if (code(err) === 'ENOENT') return undefined;
    throw new ToolError(fsMessage(err, shown));
  }
}

/** Returns whether the file was created (true) or replaced (false). */
export async function atomicWrite(dir: PinnedDir, name: string, shown: string, bytes: Uint8Array, options: AtomicWriteOptions = {}): Promise<boolean> {
  const existing = lstatOrNone(dir, name, shown);
  if (existing?.isDirectory()) throw new ToolError(`Is a directory: ${shown}`);
  if (existing && options.exclusive) throw new ToolError(`Already exists: ${shown} (mode "create" never replaces a file)`);
  const temp = `.toolgate-${randomBytes(8).toString('hex')}.tmp`;
  try {
    const fd = dir.openFile(temp, O_WRONLY | O_CREAT | O_EXCL, 0o666);
    try {
      await writeFully(fd, bytes);
      // Replacing a file keeps its permission bits (an executable script stays executable).
      if (existing?.isFile()) fchmodSync(fd, existing.mode & 0o7777);
    } finally {
      closeSync(fd);
    }
    if (options.expect) {
      const now = lstatOrNone(dir, name, shown);
      const e = options.expect;
      if (!now || now.ino !== e.ino || now.dev !== e.dev || now.size !== e.size || now.mtimeMs !== e.mtimeMs) {
        throw new ToolError(`${shown} changed while it was being edited; nothing was written. Read it again and retry.`);
      }
    }
    if (options.exclusive) linkNoReplace(dir, temp, name, shown);
    else renameSync(dir.at(temp), dir.at(name));
  } catch (err) {
    try {
      unlinkSync(dir.at(temp));
    } catch {
      // already renamed away, or never created
    }
    if (err instanceof ToolError) throw err;
    throw new ToolError(fsMessage(err, shown));
  }
  return existing === undefined;
}

/** Publishes temp as name only if name does not exist: link(2) fails with EEXIST instead of replacing. */
function linkNoReplace(dir: PinnedDir, temp: string, name: string, shown: string): void {
  try {
    linkSync(dir.at(temp), dir.at(name));
  } catch (err) {
    if (code(err) === 'EEXIST') throw new ToolError(`Already exists: ${shown} (mode "create" never replaces a file)`);
    if (code(err) !== 'EPERM' && code(err) !== 'ENOTSUP' && code(err) !== 'EOPNOTSUPP') throw err;
    // A file system without hard links: a check and a rename (a racing creator could lose its file).
    if (lstatOrNone(dir, name, shown)) throw new ToolError(`Already exists: ${shown} (mode "create" never replaces a file)`);
    renameSync(dir.at(temp), dir.at(name));
    return;
  }
  unlinkSync(dir.at(temp));
}
