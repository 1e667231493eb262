/**
 * Glob matching for exclude / include / search patterns (picomatch). A pattern without a slash
 * matches an entry's name at any depth (`node_modules`, `*.ts`); a pattern with a slash matches
 * the path relative to the directory searched (`src/**\/*.test.ts`). Dotfiles match like any other.
 */
import picomatch from 'picomatch';
import type { Zod } from '../zod';
import { ToolError } from '../../protocol/errors';

export const globList = (z: Zod) => z.array(z.string().min(1).max(1024)).max(64);

export function globMatcher(patterns: readonly string[] | undefined, options: { nocase?: boolean } = {}): ((rel: string) => boolean) | undefined {
  if (!patterns || patterns.length === 0) return undefined;
  const opts = { dot: true, nocase: options.nocase ?? false };
  // picomatch's own `basename` option also applies to patterns with a slash, so the split is ours.
  const names = patterns.filter((p) => !p.includes('/'));
  const paths = patterns.filter((p) => p.includes('/'));
  try {
    const byName = names.length > 0 ? picomatch(names, opts) : undefined;
    const byPath = paths.length > 0 ? picomatch(paths, opts) : undefined;
    return (rel) => (byName !== undefined && byName(rel.slice(rel.lastIndexOf('/') + 1))) || (byPath !== undefined && byPath(rel));
  } catch (err) {
    throw new ToolError(`Invalid glob pattern: ${err instanceof Error ? err.message : String(err)}`);
  }
}
