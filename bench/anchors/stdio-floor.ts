/**
 * The floor of a stdio MCP server that gives toolgate's replies, built from bare Node with no
 * toolgate code: lines split off stdin, JSON.parse, one synchronous read (`readFileSync`) or one
 * `readdirSync(withFileTypes)`, and a reply of exactly the shape toolgate's `read_file` and
 * `list_directory` return (the text block and the same `structuredContent`), written with one
 * `process.stdout.write`. `tools/list` publishes toolgate's own listing of the two tools (taken
 * from a running `toolgate stdio` by the bench), so the SDK client validates the same
 * `outputSchema` against the same `structuredContent` on both.
 *
 * What it leaves out is everything a server owes its caller: no path checks (workspace wall,
 * symlinks, length, NUL), no argument validation, no limits, no cancellation, no error
 * catalogue. Whatever toolgate does, it cannot answer faster than this with that reply, so
 * floor ÷ server-filesystem through the same client is the best ratio any toolgate code can
 * reach; ours ÷ floor is what toolgate's own work costs.
 *
 * With `wall`, it also makes the system calls toolgate's workspace wall makes (and nothing else
 * of it): realpath(3) of the path, open with O_NOFOLLOW (O_NONBLOCK for files), readlink of
 * /proc/self/fd/N to see what was opened, and the directory read through that /proc link; a
 * miss is a plain throw. That floor is what the checks themselves cost, not their code.
 *
 *   node stdio-floor.js ROOT TOOLS_JSON_FILE [wall]
 */
import { closeSync, constants, fstatSync, openSync, readdirSync, readFileSync, readlinkSync, readSync, realpathSync } from 'node:fs';
import * as path from 'node:path';

const [root, toolsFile, mode] = process.argv.slice(2);
if (!root || !toolsFile) throw new Error('usage: stdio-floor.js ROOT TOOLS_JSON_FILE [wall]');
const wall = mode === 'wall';
const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = constants;

/** The wall's system calls: resolve, open without following the last link, read back what was opened. */
function openWalled(p: string, flags: number): number {
  const real = realpathSync.native(path.resolve(root!, p));
  if (!real.startsWith(`${root}/`)) throw new Error('outside');
  const fd = openSync(real, flags | O_NOFOLLOW);
  if (!readlinkSync(`/proc/self/fd/${fd}`).startsWith(`${root}/`)) throw new Error('outside');
  return fd;
}

function readBytes(p: string): Buffer {
  if (!wall) return readFileSync(path.join(root!, p));
  const fd = openWalled(p, O_RDONLY | O_NONBLOCK);
  try {
    const size = fstatSync(fd).size;
    const buf = Buffer.allocUnsafe(size);
    return buf.subarray(0, readSync(fd, buf, 0, size, 0));
  } finally {
    closeSync(fd);
  }
}

function readEntries(p: string) {
  if (!wall) return readdirSync(path.join(root!, p), { withFileTypes: true });
  const fd = openWalled(p, O_RDONLY | O_DIRECTORY);
  try {
    return readdirSync(`/proc/self/fd/${fd}`, { withFileTypes: true });
  } finally {
    closeSync(fd);
  }
}
const tools = JSON.parse(readFileSync(toolsFile, 'utf8')) as unknown[];

const LABEL = { file: 'FILE', directory: 'DIR', symlink: 'LINK', other: 'OTHER' } as const;

function readFile(p: string): unknown {
  const bytes = readBytes(p);
  const text = bytes.toString('utf8');
  return {
    content: [{ type: 'text', text }],
    structuredContent: { path: p, content: text, encoding: 'utf8', size: bytes.length, offset: 0, bytesRead: bytes.length, truncated: false },
  };
}

function listDirectory(p: string): unknown {
  const dirents = readEntries(p);
  dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const entries = dirents.map((d) => ({
    name: d.name,
    type: d.isFile() ? ('file' as const) : d.isDirectory() ? ('directory' as const) : d.isSymbolicLink() ? ('symlink' as const) : ('other' as const),
  }));
  const text = entries.map((e) => `[${LABEL[e.type]}] ${e.name}`).join('\n');
  return { content: [{ type: 'text', text }], structuredContent: { path: p, entries, total: entries.length, truncated: false } };
}

function handle(line: string): void {
  const m = JSON.parse(line) as { id?: number | string; method: string; params?: { protocolVersion?: string; name?: string; arguments?: { path: string } } };
  if (m.id === undefined) return; // notifications/initialized
  let result: unknown;
  switch (m.method) {
    case 'initialize':
      result = {
        protocolVersion: m.params?.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: wall ? 'stdio-floor-wall' : 'stdio-floor', version: '0.0.0' },
      };
      break;
    case 'tools/list':
      result = { tools };
      break;
    case 'tools/call':
      result = m.params?.name === 'read_file' ? readFile(m.params.arguments!.path) : listDirectory(m.params!.arguments!.path);
      break;
    default:
      process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } })}\n`);
      return;
  }
  process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', id: m.id, result })}\n`);
}

// Lines by hand (as toolgate's transport does), not readline: fewer layers, a lower floor.
let pending = '';
process.stdin.setEncoding('utf8').on('data', (chunk: string) => {
  pending += chunk;
  let nl: number;
  while ((nl = pending.indexOf('\n')) !== -1) {
    const line = pending.slice(0, nl);
    pending = pending.slice(nl + 1);
    if (line.length > 0) handle(line);
  }
});
