/**
 * stdio-breakdown: where the stdio time goes. The same calls as `stdio`, but from a bare JSON-RPC
 * client (JSON.parse only), so the SDK client's own validation is out of the figure; then the
 * sandbox agent alone (the second hop of `toolgate stdio --sandbox none`), and the floor of one
 * pipe round trip to a Node child that answers a fixed line.
 */
import * as path from 'node:path';
import { alternate, Side } from './lib/alternate';
import { sequential } from './lib/plan';
import { DIR_100, FILE_1K, makeFixture } from './lib/fixtures';
import { REPO_ROOT, TOOLGATE_BIN, DIST } from './lib/product';
import { RawServer, spawnRaw } from './lib/raw-client';
import type { Benchmark, BenchContext, Row } from './lib/types';

const REFERENCE_MAIN = path.join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
const AGENT_MAIN = path.join(DIST, 'executor/agent/main.js');
/** A Node child that answers every line with the same small JSON-RPC result: one pipe hop, no work. */
const ECHO_SOURCE = `let b='';process.stdin.setEncoding('utf8').on('data',c=>{b+=c;let i;while((i=b.indexOf('\\n'))!==-1){const l=b.slice(0,i);b=b.slice(i+1);const m=/"id":(\\d+)/.exec(l);process.stdout.write('{"jsonrpc":"2.0","id":'+(m?m[1]:'null')+',"result":{}}\\n')}})`;
const ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8' };

export const stdioBreakdownBench: Benchmark = {
  name: 'stdio-breakdown',
  title: 'stdio breakdown: bare JSON-RPC client (no SDK), the sandbox agent alone, one pipe hop',
  async unavailable() {
    return undefined;
  },
  async run(ctx: BenchContext): Promise<Row[]> {
    const fixture = await makeFixture();
    const { root } = fixture;
    const servers: RawServer[] = [];
    const start = async (s: Promise<RawServer>) => {
      const server = await s;
      servers.push(server);
      return server;
    };
    try {
      const theirs = await start(spawnRaw('server-filesystem', process.execPath, [REFERENCE_MAIN, root], ENV));
      const ours = await start(
        spawnRaw('toolgate stdio', process.execPath, [TOOLGATE_BIN, 'stdio', '--root', root, '--sandbox', 'none'], {
          ...ENV,
          TOOLGATE_LOG_LEVEL: 'warn',
          TOOLGATE_DATA_DIR: path.join(root, '.toolgate'),
        }),
      );
      const agent = await start(spawnRaw('sandbox agent', process.execPath, [AGENT_MAIN, '--root', root], ENV, { initialize: false, cwd: root }));
      const echo = await start(spawnRaw('node echo', process.execPath, ['-e', ECHO_SOURCE], ENV, { initialize: false }));

      const options = sequential(ctx);
      const side = (label: string, s: RawServer, call: () => Promise<unknown>): Side => ({ label, call, pids: () => [s.pid] });
      const readTheirs = side('server-filesystem read_text_file (bare client)', theirs, () =>
        theirs.call('read_text_file', { path: path.join(root, FILE_1K) }),
      );
      const listTheirs = side('server-filesystem list_directory (bare client)', theirs, () =>
        theirs.call('list_directory', { path: path.join(root, DIR_100) }),
      );
      const cases: Array<{ name: string; ours: Side; theirs: Side }> = [
        {
          name: 'read_file 1 KiB, bare client',
          ours: side('toolgate stdio (none) read_file', ours, () => ours.call('read_file', { path: FILE_1K })),
          theirs: readTheirs,
        },
        {
          name: 'list_directory 100, bare client',
          ours: side('toolgate stdio (none) list_directory', ours, () => ours.call('list_directory', { path: DIR_100 })),
          theirs: listTheirs,
        },
        {
          name: 'read_file 1 KiB, sandbox agent alone',
          ours: side('sandbox agent read_file', agent, () => agent.call('read_file', { path: FILE_1K })),
          theirs: readTheirs,
        },
        {
          name: 'list_directory 100, sandbox agent alone',
          ours: side('sandbox agent list_directory', agent, () => agent.call('list_directory', { path: DIR_100 })),
          theirs: listTheirs,
        },
        {
          name: 'list_directory 100 with sizes, sandbox agent alone (vs list_directory_with_sizes)',
          ours: side('sandbox agent list_directory details', agent, () => agent.call('list_directory', { path: DIR_100, details: true })),
          theirs: side('server-filesystem list_directory_with_sizes (bare client)', theirs, () =>
            theirs.call('list_directory_with_sizes', { path: path.join(root, DIR_100) }),
          ),
        },
        {
          name: 'one pipe round trip (floor)',
          ours: side('node echo child', echo, () => echo.request('ping')),
          theirs: side('server-filesystem ping (bare client)', theirs, () => theirs.request('ping')),
        },
      ];
      const rows: Row[] = [];
      for (const c of cases) {
        ctx.log(`stdio-breakdown: ${c.name}`);
        const [o, t] = await alternate([c.ours, c.theirs], options);
        rows.push({
          bench: 'stdio-breakdown',
          case: c.name,
          ours: { label: c.ours.label, summary: o! },
          theirs: { label: c.theirs.label, summary: t! },
          concurrency: 1,
        });
      }
      return rows;
    } finally {
      for (const s of servers) await s.close().catch(() => undefined);
      await fixture.remove();
    }
  },
};
