/**
 * The routes out of the workspace and the calls that try each, for the escape suite. A route
 * gives three paths as the tools see them: `file` (an existing outside file), `fresh` (an
 * outside name that does not exist yet) and `dir` (an outside directory). `links` says which of
 * them name a symlink in the root itself: deleting, moving or describing *the link* is allowed.
 */
import * as path from 'node:path';
import type { ToolResult } from '../../shared/tools/tool';

export interface RouteInput {
  root: string;
  rootAsSeen: string;
  outside: string;
}
type Slot = 'file' | 'fresh' | 'dir';
export interface Route {
  file: string;
  fresh: string;
  dir: string;
  links: Slot[];
}

const LONG = 'a/'.repeat(2600) + 'x';
const over = (dir: string): Route => ({ file: `${dir}/secret.txt`, fresh: `${dir}/new.txt`, dir, links: [] });

export const routes: Array<[string, (i: RouteInput) => Route]> = [
  ['dot-dot', (i) => over(path.relative(i.root, i.outside))],
  ['dot-dot after a subdirectory', (i) => over(`inside/../${path.relative(i.root, i.outside)}`)],
  ['absolute path outside', (i) => over(i.outside)],
  ['prefix sibling, absolute (/root_evil)', (i) => over(`${i.rootAsSeen}_evil`)],
  ['prefix sibling, relative', (i) => over(`../${path.basename(i.root)}_evil`)],
  ['symlink to an outside directory', () => ({ ...over('link-out'), links: ['dir'] })],
  ['relative symlink out', () => ({ ...over('link-rel-out'), links: ['dir'] })],
  ['symlink chain out', () => ({ ...over('chain'), links: ['dir'] })],
  ['symlink up and over', (i) => over(`inside/up/${path.basename(i.outside)}`)],
  ['symlink to an outside file', () => ({ file: 'file-link', fresh: 'dangling', dir: 'link-out', links: ['file', 'fresh', 'dir'] })],
  ['dangling symlink out', () => ({ file: 'dangling', fresh: 'dangling-dir/new.txt', dir: 'dangling-dir', links: ['file', 'dir'] })],
  ['NUL byte', () => ({ file: 'ok.txt\0/../../secret.txt', fresh: 'new\0.txt', dir: 'inside\0', links: [] })],
  ['over-long path', () => ({ file: LONG, fresh: `${LONG}/n`, dir: LONG, links: [] })],
  [
    'over-long path through a link',
    () => ({ file: `link-out/${'x'.repeat(5000)}`, fresh: `link-out/${'y'.repeat(5000)}`, dir: `link-out/${'z'.repeat(5000)}`, links: [] }),
  ],
];

export interface Invocation {
  label: string;
  tool: string;
  uses: Slot;
  /** The call acts on the link itself (never its target), so success is fine when the path is a link. */
  onLinkItself: boolean;
  args(r: Route): Record<string, unknown>;
  refused(r: ToolResult): boolean;
}

const isError = (r: ToolResult): boolean => r.isError === true;
const FIND = { query: 'TOOLGATE-SECRET-[0-9a-f]+', regex: true };
const inv = (label: string, tool: string, uses: Slot, args: (r: Route) => Record<string, unknown>, more: Partial<Invocation> = {}): Invocation => ({
  label,
  tool,
  uses,
  onLinkItself: false,
  args,
  refused: isError,
  ...more,
});

export const invocations: Invocation[] = [
  inv('read_file', 'read_file', 'file', (r) => ({ path: r.file })),
  inv('read_file tail', 'read_file', 'file', (r) => ({ path: r.file, tail: 1 })),
  inv('read_multiple_files', 'read_multiple_files', 'file', (r) => ({ paths: [r.file, 'ok.txt'] }), {
    refused: (res) => !res.isError && 'error' in ((res.structuredContent?.files as Array<Record<string, unknown>>)[0] ?? {}),
  }),
  inv('search_text', 'search_text', 'dir', (r) => ({ path: r.dir, ...FIND })),
  inv('list_directory', 'list_directory', 'dir', (r) => ({ path: r.dir })),
  inv('directory_tree', 'directory_tree', 'dir', (r) => ({ path: r.dir })),
  inv('search_files', 'search_files', 'dir', (r) => ({ path: r.dir, pattern: '*' })),
  inv('get_file_info (file)', 'get_file_info', 'file', (r) => ({ path: r.file }), { onLinkItself: true }),
  inv('get_file_info (dir)', 'get_file_info', 'dir', (r) => ({ path: r.dir }), { onLinkItself: true }),
  inv('write_file overwrite', 'write_file', 'file', (r) => ({ path: r.file, content: 'PWNED' })),
  inv('write_file overwrite (new)', 'write_file', 'fresh', (r) => ({ path: r.fresh, content: 'PWNED' })),
  inv('write_file create (new)', 'write_file', 'fresh', (r) => ({ path: r.fresh, content: 'PWNED', mode: 'create' })),
  inv('write_file append', 'write_file', 'file', (r) => ({ path: r.file, content: 'PWNED', mode: 'append' })),
  inv('write_file append (new)', 'write_file', 'fresh', (r) => ({ path: r.fresh, content: 'PWNED', mode: 'append' })),
  inv('edit_file', 'edit_file', 'file', (r) => ({ path: r.file, edits: [{ oldText: 'TOOLGATE', newText: 'PWNED' }] })),
  inv('edit_file dryRun', 'edit_file', 'file', (r) => ({ path: r.file, edits: [{ oldText: 'TOOLGATE', newText: 'PWNED' }], dryRun: true })),
  inv('create_directory (new)', 'create_directory', 'fresh', (r) => ({ path: r.fresh })),
  inv('create_directory (in dir)', 'create_directory', 'dir', (r) => ({ path: `${r.dir}/newdir` })),
  inv('move_path out of (file)', 'move_path', 'file', (r) => ({ source: r.file, destination: 'stolen.txt' }), { onLinkItself: true }),
  inv('move_path out of (dir)', 'move_path', 'dir', (r) => ({ source: r.dir, destination: 'stolen-dir' }), { onLinkItself: true }),
  inv('move_path into (new)', 'move_path', 'fresh', (r) => ({ source: 'ok.txt', destination: r.fresh })),
  inv('move_path into (over)', 'move_path', 'file', (r) => ({ source: 'ok.txt', destination: r.file, overwrite: true }), { onLinkItself: true }),
  inv('move_path into (dir)', 'move_path', 'dir', (r) => ({ source: 'ok.txt', destination: `${r.dir}/moved.txt` })),
  inv('delete_path (file)', 'delete_path', 'file', (r) => ({ path: r.file }), { onLinkItself: true }),
  inv('delete_path (dir, recursive)', 'delete_path', 'dir', (r) => ({ path: r.dir, recursive: true }), { onLinkItself: true }),
  inv('delete_path (in dir, recursive)', 'delete_path', 'dir', (r) => ({ path: `${r.dir}/dir`, recursive: true })),
];

/** Walks and searches from the root, where the links out are entries: listed, never followed. */
export const rootInvocations: Array<{ label: string; tool: string; args: Record<string, unknown> }> = [
  { label: 'list_directory', tool: 'list_directory', args: { path: '.' } },
  { label: 'directory_tree', tool: 'directory_tree', args: { path: '.' } },
  { label: 'search_files', tool: 'search_files', args: { path: '.', pattern: '*' } },
  { label: 'search_files (path glob)', tool: 'search_files', args: { path: '.', pattern: '**/*.txt' } },
  { label: 'search_text', tool: 'search_text', args: { path: '.', ...FIND } },
  { label: 'read_multiple_files', tool: 'read_multiple_files', args: { paths: ['file-link', 'link-out/secret.txt', 'dangling', 'ok.txt'] } },
];
