/** The four kinds of directory entry the file tools report. Symlinks are reported, never followed. */
import type { Dirent, Stats } from 'node:fs';
import type { Zod } from '../zod';

export const ENTRY_TYPES = ['file', 'directory', 'symlink', 'other'] as const;
export type EntryType = (typeof ENTRY_TYPES)[number];
export const entryTypeSchema = (z: Zod) => z.enum(ENTRY_TYPES);

export function entryType(d: Dirent | Stats): EntryType {
  if (d.isSymbolicLink()) return 'symlink';
  if (d.isFile()) return 'file';
  if (d.isDirectory()) return 'directory';
  return 'other';
}

/** The workspace path of `rel` below a directory shown as `base`. */
export const joinShown = (base: string, rel: string): string => (base === '.' ? rel : `${base}/${rel}`);
