/**
 * The workspace wall: maps a caller's path to something inside the tenant's root, or refuses.
 * Defence in depth: the sandbox is the boundary; this keeps the `none` backend honest and makes
 * refusals readable. A path may be relative to the root or absolute inside it.
 *
 * Checking a path and then using it is a race a concurrent symlink swap can win, so every
 * operation here *opens* what it checked and then checks what it opened: the descriptor's path
 * (`/proc/self/fd/N`) must lie inside the root. Writes go through a PinnedDir (the verified
 * parent) and never follow a symlink in their last component. Linux only: needs /proc.
 */
import { closeSync, lstatSync, mkdirSync, openSync, promises as fs, readlinkSync, realpathSync } from 'node:fs';
import * as path from 'node:path';
import { ToolError } from '../protocol/errors';
import { fsMessage } from './fs-message';
import { DIR_FLAGS, fdPath, PinnedDir, READ_FLAGS } from './pinned-dir';

export { fsMessage } from './fs-message';
export { PinnedDir } from './pinned-dir';

/** Symlinks followed while resolving one path, as the kernel's own limit (MAXSYMLINKS). */
const MAX_LINK_HOPS = 40;

const errCode = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | undefined)?.code;

export class Workspace {
  private constructor(
    /** The root's real path (symlinks resolved). */
    readonly root: string,
    private readonly maxPathLength: number,
  ) {}

  static async open(root: string, maxPathLength = 4096): Promise<Workspace> {
    const real = await fs.realpath(root).catch(() => {
      throw new Error(`workspace root ${root} does not exist`);
    });
    const handle = await fs.open(real, DIR_FLAGS).catch(() => {
      throw new Error(`workspace root ${root} is not a directory`);
    });
    try {
      const seen = await fs.readlink(fdPath(handle.fd)).catch(() => undefined);
      if (seen !== real) throw new Error(`the workspace wall needs Linux /proc/self/fd to check opened files, and it is not usable here`);
    } finally {
      await handle.close();
    }
    return new Workspace(real, maxPathLength);
  }

  /** The caller-facing form of a normalized absolute path inside the root ("." for the root itself). */
  display(absolute: string): string {
    if (absolute === this.root) return '.';
    // A normalized path below the root is the root, a separator, and the rest: no need for
    // path.relative's normalizing of both sides on every call (the lexical check made it so).
    if (this.contains(absolute)) return absolute.slice(this.root.endsWith(path.sep) ? this.root.length : this.root.length + 1);
    return path.relative(this.root, absolute);
  }

  /**
   * Resolves `input` to an absolute path inside the root, following symlinks of every existing
   * component (and the targets of dangling ones) so none can lead outside. The last components
   * need not exist. A check only: use the open* methods to act on the result.
   */
  async resolve(input: string): Promise<string> {
    const lexical = this.lexical(input);
    return this.inside(this.realpathOf(lexical, this.display(lexical)), this.display(lexical));
  }

  /** Lexical checks only: length, NUL, and `..` or an absolute path leaving the root. */
  lexical(input: string): string {
    if (typeof input !== 'string' || input.length === 0) throw new ToolError('Path must be a non-empty string');
    if (input.includes('\0')) throw new ToolError('Path must not contain NUL bytes');
    if (Buffer.byteLength(input) > this.maxPathLength) throw new ToolError(`Path is longer than ${this.maxPathLength} bytes`);
    const absolute = path.resolve(this.root, input);
    if (!this.contains(absolute)) throw new ToolError(`Access denied: ${input} is outside the workspace`);
    return absolute;
  }

  /** True when `absolute` is the root or below it; `/root_evil` is not below `/root`. */
  contains(absolute: string): boolean {
    return absolute === this.root || absolute.startsWith(this.root.endsWith(path.sep) ? this.root : this.root + path.sep);
  }

  /** The caller-facing form of a caller's path (after the lexical checks). */
  shown(input: string): string {
    return this.display(this.lexical(input));
  }

  /**
   * Opens an existing file or directory for reading; symlinks are followed only while they stay
   * inside. Returns the descriptor: the caller closes it.
   */
  async openRead(input: string): Promise<{ fd: number; shown: string }> {
    const lexical = this.lexical(input);
    const shown = this.display(lexical);
    const real = this.inside(this.realpathOf(lexical, shown), shown);
    let fd: number;
    try {
      fd = openSync(real, READ_FLAGS);
    } catch (err) {
      throw new ToolError(fsMessage(err, shown));
    }
    this.verify(fd, shown);
    return { fd, shown };
  }

  /** Opens a directory (following symlinks that stay inside), creating it and its parents if asked. */
  async openDir(input: string, options: { create?: boolean } = {}): Promise<PinnedDir> {
    const lexical = this.lexical(input);
    const shown = this.display(lexical);
    return this.openDirReal(this.inside(this.realpathOf(lexical, shown), shown), shown, options.create ?? false);
  }

  /**
   * Opens the directory that holds `input`'s last component and returns that component's name.
   * `followLast`: a symlink in the last component is resolved first (it must stay inside);
   * otherwise the operation applies to the link itself. The root itself has no parent here.
   */
  async openParent(input: string, options: { followLast: boolean; createParents?: boolean }): Promise<{ dir: PinnedDir; name: string; shown: string }> {
    const lexical = this.lexical(input);
    const shown = this.display(lexical);
    if (lexical === this.root) throw new ToolError(`Refused: ${input} is the workspace root itself`);
    const target = options.followLast
      ? this.inside(this.realpathOf(lexical, shown), shown)
      : path.join(this.inside(this.realpathOf(path.dirname(lexical), shown), shown), path.basename(lexical));
    if (target === this.root) throw new ToolError(`Refused: ${input} is the workspace root itself`);
    const dir = this.openDirReal(path.dirname(target), shown, options.createParents ?? false);
    return { dir, name: path.basename(target), shown };
  }

  private inside(real: string, shown: string): string {
    if (!this.contains(real)) throw new ToolError(`Access denied: ${shown} leads outside the workspace`);
    return real;
  }

  /** The check after the open: what the descriptor really is must lie inside the root. */
  private verify(fd: number, shown: string): void {
    let opened = '';
    try {
      opened = readlinkSync(fdPath(fd));
    } catch {
      // unreadable: treated as outside
    }
    if (!this.contains(opened)) {
      closeSync(fd);
      throw new ToolError(`Access denied: ${shown} leads outside the workspace`);
    }
  }

  private openDirReal(real: string, shown: string, create: boolean): PinnedDir {
    let fd: number;
    try {
      fd = openSync(real, DIR_FLAGS);
    } catch (err) {
      if (!create || errCode(err) !== 'ENOENT' || real === this.root || !this.contains(real)) throw new ToolError(fsMessage(err, shown));
      // Create the missing directory inside its own pinned parent, so no swap can redirect mkdir.
      const name = path.basename(real);
      const parent = this.openDirReal(path.dirname(real), shown, true);
      try {
        try {
          mkdirSync(parent.at(name));
        } catch (e) {
          if (errCode(e) !== 'EEXIST') throw new ToolError(fsMessage(e, shown));
        }
        try {
          return parent.openDir(name, shown);
        } catch (e) {
          throw new ToolError(fsMessage(e, shown));
        }
      } finally {
        parent.close();
      }
    }
    this.verify(fd, shown);
    return new PinnedDir(fd, shown);
  }

  /**
   * The real path `absolute` names. The common case (everything exists) is one realpath(3); a
   * path with missing components is walked one component at a time as the kernel would, so a
   * dangling symlink is judged by where it really leads (`out/../x` through a link named `out`
   * climbs out of the link's target, not out of the link's directory).
   */
  private realpathOf(absolute: string, shown: string): string {
    try {
      return realpathSync.native(absolute);
    } catch (err) {
      const code = errCode(err);
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new ToolError(fsMessage(err, shown));
    }
    const queue = path.relative(this.root, absolute).split(path.sep);
    let current = this.root;
    let hops = 0;
    while (queue.length > 0) {
      const part = queue.shift()!;
      if (part === '' || part === '.') continue;
      if (part === '..') {
        current = path.dirname(current); // current is real, so its parent is too
        continue;
      }
      const next = path.join(current, part);
      let stat;
      try {
        stat = lstatSync(next);
      } catch (err) {
        const code = errCode(err);
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new ToolError(fsMessage(err, shown));
        // The rest does not exist (yet): it is taken lexically, as mkdir -p would create it.
        return path.join(next, ...queue);
      }
      if (stat.isSymbolicLink()) {
        if (++hops > MAX_LINK_HOPS) throw new ToolError(fsMessage({ code: 'ELOOP' }, shown));
        let target: string;
        try {
          target = readlinkSync(next);
        } catch (err) {
          // EINVAL: no longer a link; something is swapping this path right now.
          throw new ToolError(errCode(err) === 'EINVAL' ? `${shown} changed while it was being resolved; try again` : fsMessage(err, shown));
        }
        if (path.isAbsolute(target)) current = path.parse(target).root;
        queue.unshift(...target.split(path.sep));
        continue;
      }
      current = next;
    }
    return current;
  }
}
