/**
 * stdio: `toolgate stdio` against the official @modelcontextprotocol/server-filesystem, both
 * driven by the official SDK client over pipes. Our read_file against its read_text_file on a
 * 1 KiB file, and list_directory on 100 entries. Ours runs the tools in its sandbox agent (a child
 * process), so its RSS is the server plus the agent. bwrap is measured too when it can run here.
 */
import * as path from 'node:path';
import { alternate } from './lib/alternate';
import { sequential } from './lib/plan';
import { canRunBwrap } from './lib/availability';
import { chownTree, DIR_100, FILE_1K, makeFixture } from './lib/fixtures';
import { connectStdio, StdioServer } from './lib/mcp-stdio';
import { REPO_ROOT, TOOLGATE_BIN } from './lib/product';
import type { Benchmark, BenchContext, Row } from './lib/types';

const REFERENCE_MAIN = path.join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
const OURS = 'toolgate stdio';
const THEIRS = 'server-filesystem';

/** Starts `toolgate stdio` on a backend; extra node flags (e.g. --cpu-prof) come from TOOLGATE_BENCH_NODE_FLAGS. */
export function startToolgateStdio(root: string, sandbox: 'none' | 'bwrap'): Promise<StdioServer> {
  const nodeFlags = (process.env.TOOLGATE_BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean);
  return connectStdio(`${OURS} (${sandbox})`, process.execPath, [...nodeFlags, TOOLGATE_BIN, 'stdio', '--root', root, '--sandbox', sandbox], {
    TOOLGATE_LOG_LEVEL: 'warn',
    TOOLGATE_DATA_DIR: path.join(root, '.toolgate'),
  });
}

export function startReference(root: string): Promise<StdioServer> {
  const nodeFlags = (process.env.TOOLGATE_BENCH_NODE_FLAGS_REFERENCE ?? '').split(' ').filter(Boolean);
  return connectStdio(THEIRS, process.execPath, [...nodeFlags, REFERENCE_MAIN, root]);
}

export const stdioBench: Benchmark = {
  name: 'stdio',
  title: 'stdio: toolgate stdio vs @modelcontextprotocol/server-filesystem (SDK client both sides)',
  async unavailable() {
    return undefined;
  },
  async run(ctx: BenchContext): Promise<Row[]> {
    const fixture = await makeFixture();
    const { root } = fixture;
    const servers: StdioServer[] = [];
    try {
      const theirs = await start(servers, startReference(root));
      const oursNone = await start(servers, startToolgateStdio(root, 'none'));
      const bwrapWhy = await canRunBwrap();
      if (bwrapWhy === undefined) await chownTree(root, 65534); // the bwrap agent runs as nobody
      const oursBwrap = bwrapWhy === undefined ? await start(servers, startToolgateStdio(root, 'bwrap')) : undefined;
      if (bwrapWhy) ctx.log(`stdio: bwrap rows skipped: ${bwrapWhy}`);

      const options = sequential(ctx);
      const readOurs = (s: StdioServer) => () => s.call('read_file', { path: FILE_1K });
      const readTheirs = () => theirs.call('read_text_file', { path: path.join(root, FILE_1K) });
      const listOurs = (s: StdioServer) => () => s.call('list_directory', { path: DIR_100 });
      const listTheirs = () => theirs.call('list_directory', { path: path.join(root, DIR_100) });

      const cases: Array<{ name: string; sandbox: string; ours: () => Promise<unknown>; oursPid: number; theirs: () => Promise<unknown> }> = [
        { name: 'read_file 1 KiB (vs read_text_file)', sandbox: 'none', ours: readOurs(oursNone), oursPid: oursNone.pid, theirs: readTheirs },
        { name: 'list_directory 100 entries', sandbox: 'none', ours: listOurs(oursNone), oursPid: oursNone.pid, theirs: listTheirs },
      ];
      if (oursBwrap) {
        cases.push(
          { name: 'read_file 1 KiB (vs read_text_file)', sandbox: 'bwrap', ours: readOurs(oursBwrap), oursPid: oursBwrap.pid, theirs: readTheirs },
          { name: 'list_directory 100 entries', sandbox: 'bwrap', ours: listOurs(oursBwrap), oursPid: oursBwrap.pid, theirs: listTheirs },
        );
      }

      const rows: Row[] = [];
      for (const c of cases) {
        ctx.log(`stdio: ${c.name}, sandbox ${c.sandbox}: ${options.calls} sequential calls per side in ${options.rounds} alternating rounds`);
        const [ours, ref] = await alternate(
          [
            { label: `${OURS} (${c.sandbox})`, call: c.ours, pids: () => [c.oursPid] },
            { label: THEIRS, call: c.theirs, pids: () => [theirs.pid] },
          ],
          options,
        );
        rows.push({
          bench: 'stdio',
          case: `${c.name} [sandbox ${c.sandbox}]`,
          ours: { label: `${OURS} --sandbox ${c.sandbox}`, summary: ours! },
          theirs: { label: THEIRS, summary: ref! },
          concurrency: 1,
          target: c.sandbox === 'none' ? { metric: 'p50-ratio', op: '<=', value: 0.5 } : undefined,
          note: c.sandbox === 'none' ? undefined : 'no target: bwrap is the isolating option, shown for its cost',
        });
      }
      return rows;
    } finally {
      for (const s of servers) await s.close().catch(() => undefined);
      await fixture.remove();
    }
  },
};

async function start(servers: StdioServer[], starting: Promise<StdioServer>): Promise<StdioServer> {
  const s = await starting;
  servers.push(s);
  return s;
}
