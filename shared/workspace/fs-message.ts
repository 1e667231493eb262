import { noSpaceMessage } from './quota';

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
      return `Not a directory (a path component is a file): ${shown}`;
    case 'EACCES':
    case 'EPERM':
      return `Permission denied: ${shown}`;
    case 'ENOTEMPTY':
      return `Directory not empty: ${shown}`;
    case 'ELOOP':
      return `Refused: ${shown} is (or passes through) a symbolic link where none may be followed, or the links loop`;
    case 'ENAMETOOLONG':
      return `Path too long: ${shown}`;
    case 'ENOSPC':
    case 'EDQUOT':
      return noSpaceMessage(shown);
    case 'EROFS':
      return `Read-only file system: ${shown}`;
    case 'EXDEV':
      return `Cannot move across file systems: ${shown}`;
    case 'EINVAL':
      return `Invalid operation on ${shown} (e.g. moving a directory into itself)`;
    case 'EBUSY':
      return `Resource busy: ${shown}`;
    case 'ENXIO':
    case 'ENODEV':
      return `Not a regular file: ${shown}`;
    case 'EMFILE':
    case 'ENFILE':
      return `Too many open files while accessing ${shown}`;
    default:
      return `Filesystem error${code ? ` (${code})` : ''} on ${shown}`;
  }
}
