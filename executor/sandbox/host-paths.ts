/**
 * Absolute host paths inside the workspace, accepted on every backend. A local agent (Claude Code
 * and the like) sends the paths it sees, `/home/ann/project/src/a.ts`; inside bwrap or a container
 * the workspace is `/workspace`, so the agent's wall would refuse that path as outside, although
 * `none` accepts it. Before a call reaches the agent, every path argument that names the host
 * root or a place below it becomes the same place relative to the root, which means the same on
 * every backend. Anything else is passed on unchanged: relative paths as they are, and absolute
 * paths outside the root to the agent's wall, which refuses them ("outside the workspace").
 *
 * Path arguments are the tools' `path`, `paths`, `source`, `destination` and `cwd`. Paths inside
 * a command line are the command's business: on bwrap and docker a command sees /workspace.
 */
import { realpathSync } from 'node:fs';
import * as path from 'node:path';

const PATH_KEYS = ['path', 'source', 'destination', 'cwd'] as const;
const PATH_LIST_KEYS = ['paths'] as const;

export type ArgsTranslator = (args: unknown) => unknown;

/** A translator for the workspace at `hostRoot` (as given, and as its real path if that differs). */
export function hostPathTranslator(hostRoot: string): ArgsTranslator {
  const roots = new Set([path.resolve(hostRoot)]);
  try {
    roots.add(realpathSync(hostRoot));
  } catch {
    // a missing root fails the sandbox's start anyway
  }
  const one = (p: unknown): unknown => {
    if (typeof p !== 'string' || !path.isAbsolute(p) || p.includes('\0')) return p;
    const abs = path.resolve(p); // `/root/a/../../etc` is judged where it really points
    for (const root of roots) {
      if (abs === root) return '.';
      if (abs.startsWith(root === '/' ? root : root + path.sep)) return path.relative(root, abs);
    }
    return p;
  };
  return (args) => {
    if (typeof args !== 'object' || args === null || Array.isArray(args)) return args;
    const input = args as Record<string, unknown>;
    let out: Record<string, unknown> | undefined;
    const set = (key: string, value: unknown) => {
      if (value === input[key]) return;
      out ??= { ...input };
      out[key] = value;
    };
    for (const key of PATH_KEYS) if (key in input) set(key, one(input[key]));
    for (const key of PATH_LIST_KEYS) {
      const list = input[key];
      if (Array.isArray(list) && list.some((p) => one(p) !== p)) set(key, list.map(one));
    }
    return out ?? args;
  };
}
