/**
 * A directory held open by file descriptor, already checked to lie inside the workspace.
 *
 * Node has no openat(2), so names inside the directory are reached through the kernel's
 * `/proc/self/fd/N/name` magic link: the lookup starts at the directory we hold, whatever has
 * been renamed or swapped above it since the check. Every operation on `name` itself is one
 * that never follows a symlink in the last component (open with O_NOFOLLOW, lstat, mkdir,
 * rename, link, unlink, rmdir), so a name can never lead out of the pinned directory.
 *
 * Metadata calls are synchronous on purpose: each is a syscall of a few microseconds, where a
 * thread-pool round trip costs tens (read_file of 1 KiB: ~15 µs instead of ~270 µs). Bulk data
 * moves through fd-io.ts, which goes to the thread pool for large transfers.
 */
import { closeSync, constants, Dirent, fstatSync, lstatSync, openSync, readdirSync, Stats } from 'node:fs';

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;

/** Opens a directory without following a symlink in its last component. */
export const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
/**
 * Opens for reading without following a final symlink; O_NONBLOCK so a FIFO planted in the
 * workspace cannot hang the agent (callers then refuse anything that is not a regular file).
 */
export const READ_FLAGS = O_RDONLY | O_NOFOLLOW | O_NONBLOCK;

/** The path through which the kernel reaches the object behind an open descriptor. */
export const fdPath = (fd: number): string => `/proc/self/fd/${fd}`;

export class PinnedDir {
  private open = true;

  constructor(
    private readonly fd: number,
    /** The caller-facing path of this directory, for messages. */
    readonly shown: string,
  ) {}

  /** A path naming `name` inside this very directory (a single component, never `..`). */
  at(name: string): string {
    if (name === '' || name === '.' || name === '..' || name.includes('/')) throw new Error(`not a single path component: ${name}`);
    return `${fdPath(this.fd)}/${name}`;
  }

  readdir(): Dirent[] {
    return readdirSync(fdPath(this.fd), { withFileTypes: true });
  }

  lstat(name: string): Stats {
    return lstatSync(this.at(name));
  }

  stat(): Stats {
    return fstatSync(this.fd);
  }

  /** Opens the subdirectory `name`; a symlink there is refused (ELOOP), never followed. */
  openDir(name: string, shown: string): PinnedDir {
    return new PinnedDir(openSync(this.at(name), DIR_FLAGS), shown);
  }

  /** Opens `name` with `flags`, to which O_NOFOLLOW is always added. Returns the descriptor. */
  openFile(name: string, flags: number, mode?: number): number {
    return openSync(this.at(name), flags | O_NOFOLLOW, mode);
  }

  close(): void {
    if (!this.open) return;
    this.open = false;
    closeSync(this.fd);
  }
}

/** Runs `body` with `dir`, closing it afterwards whatever happens. */
export async function withDir<T>(dir: PinnedDir, body: (dir: PinnedDir) => T | Promise<T>): Promise<T> {
  try {
    return await body(dir);
  } finally {
    dir.close();
  }
}
