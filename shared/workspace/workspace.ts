/**
 * The workspace wall: maps a caller's path to a real path inside the tenant's root, or refuses.
 * Defence in depth: the sandbox is the boundary; this keeps the `none` backend honest and makes
 * refusals readable. A path may be relative to the root or absolute inside it.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { ToolError } from '../protocol/errors';

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
    const stat = await fs.stat(real);
    if (!stat.isDirectory()) throw new Error(`workspace root ${root} is not a directory`);
    return new Workspace(real, maxPathLength);
  }

  /** The caller-facing form of an absolute path inside the root ("." for the root itself). */
  display(absolute: string): string {
    const rel = path.relative(this.root, absolute);
    return rel === '' ? '.' : rel;
  }

  /**
   * Resolves `input` to an absolute path inside the root, following symlinks of every existing
   * component so none can lead outside. The last component need not exist.
   */
  async resolve(input: string): Promise<string> {
    const lexical = this.lexical(input);
    const real = await this.realpathOfExistingPrefix(lexical);
    if (!this.contains(real)) throw new ToolError(`Access denied: ${input} resolves outside the workspace`);
    return real;
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

  private async realpathOfExistingPrefix(absolute: string): Promise<string> {
    const missing: string[] = [];
    let current = absolute;
    for (;;) {
      try {
        const real = await fs.realpath(current);
        return missing.length === 0 ? real : path.join(real, ...missing.reverse());
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new ToolError(fsMessage(err, this.display(current)));
        // A dangling symlink must not be treated as "missing": its target could be outside.
        const link = await fs.lstat(current).catch(() => undefined);
        if (link?.isSymbolicLink()) {
          const target = path.resolve(path.dirname(current), await fs.readlink(current));
          if (!this.contains(target)) throw new ToolError(`Access denied: ${this.display(absolute)} leads outside the workspace`);
        }
        const parent = path.dirname(current);
        if (parent === current) throw new ToolError(`Cannot resolve ${this.display(absolute)}`);
        missing.push(path.basename(current));
        current = parent;
      }
    }
  }
}

/** A filesystem error as a sentence naming the caller's path, never the host's. */
export function fsMessage(err: unknown, shown: string): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ENOENT':
      return `No such file or directory: ${shown}`;
    case 'EEXIST':
      return `Already exists: ${shown}`;
    case 'EISDIR':
      return `Is a directory: ${shown}`;
    case 'ENOTDIR':
      return `Not a directory: ${shown}`;
    case 'EACCES':
    case 'EPERM':
      return `Permission denied: ${shown}`;
    case 'ENOTEMPTY':
      return `Directory not empty: ${shown}`;
    case 'ELOOP':
      return `Too many levels of symbolic links (or a symlink where none is allowed): ${shown}`;
    case 'ENOSPC':
      return `No space left on device while writing ${shown}`;
    case 'EROFS':
      return `Read-only file system: ${shown}`;
    default:
      return `Filesystem error${code ? ` (${code})` : ''} on ${shown}`;
  }
}
