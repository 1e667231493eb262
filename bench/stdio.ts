/**
 * stdio: `toolgate stdio` against the official @modelcontextprotocol/server-filesystem, both
 * driven by the official SDK client over pipes. Our read_file against its read_text_file on a
 * 1 KiB file, and list_directory on 100 entries. With `--sandbox none` the tools run in the stdio
 * process; with bwrap (measured when it can run here) in a sandbox agent under it, so its RSS is
 * the server plus the agent.
 *
 * In the same alternating rounds as the `none` rows runs the floor (anchors/stdio-floor.ts): bare
 * Node giving toolgate's exact replies and outputSchema with no toolgate code and no checks.
 * floor ÷ theirs is the best ratio any server with that reply reaches through this client.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { alternate, Side } from './lib/alternate';
import { sequential } from './lib/plan';
import { canRunBwrap } from './lib/availability';
import { chownTree, DIR_100, FILE_1K, makeFixture } from './lib/fixtures';
import { connectStdio, StdioServer } from './lib/mcp-stdio';
import { REPO_ROOT, TOOLGATE_BIN } from './lib/product';
import type { Benchmark, BenchContext, Row } from './lib/types';

const REFERENCE_MAIN = path.join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
const FLOOR_MAIN = path.join(REPO_ROOT, 'dist-bench/bench/anchors/stdio-floor.js');
const OURS = 'toolgate stdio';
const THEIRS = 'server-filesystem';
const FLOOR = 'floor: bare Node, our reply';
const FLOOR_WALL = 'floor + the wall: bare Node, our reply, the workspace wall’s system calls';

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

/**
 * Starts the floor serving toolgate's own listing of read_file and list_directory (schemas
 * included), taken from a running `toolgate stdio`, so the client validates the same outputSchema.
 */
async function startFloor(root: string, ours: StdioServer, work: string, wall: boolean): Promise<StdioServer> {
  const { tools } = await ours.client.listTools();
  const file = path.join(work, 'floor-tools.json');
  await fs.writeFile(file, JSON.stringify(tools.filter((t) => t.name === 'read_file' || t.name === 'list_directory')));
  return connectStdio(wall ? FLOOR_WALL : FLOOR, process.execPath, [FLOOR_MAIN, root, file, ...(wall ? ['wall'] : [])]);
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
    const work = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-bench-floor-'));
    try {
      const theirs = await start(servers, startReference(root));
      const oursNone = await start(servers, startToolgateStdio(root, 'none'));
      const floor = await start(servers, startFloor(root, oursNone, work, false));
      const floorWall = await start(servers, startFloor(root, oursNone, work, true));
      const bwrapWhy = await canRunBwrap();
      if (bwrapWhy === undefined) await chownTree(root, 65534); // the bwrap agent runs as nobody
      const oursBwrap = bwrapWhy === undefined ? await start(servers, startToolgateStdio(root, 'bwrap')) : undefined;
      if (bwrapWhy) ctx.log(`stdio: bwrap rows skipped: ${bwrapWhy}`);

      const options = sequential(ctx);
      const readOurs = (s: StdioServer) => () => s.call('read_file', { path: FILE_1K });
      const readTheirs = () => theirs.call('read_text_file', { path: path.join(root, FILE_1K) });
      const listOurs = (s: StdioServer) => () => s.call('list_directory', { path: DIR_100 });
      const listTheirs = () => theirs.call('list_directory', { path: path.join(root, DIR_100) });

      const cases: Array<{
        name: string;
        sandbox: string;
        ours: () => Promise<unknown>;
        oursPid: number;
        theirs: () => Promise<unknown>;
        /** The floors run in the same rounds (none only): bare, and bare with the wall's system calls. */
        floors?: boolean;
      }> = [
        {
          name: 'read_file 1 KiB (vs read_text_file)',
          sandbox: 'none',
          ours: readOurs(oursNone),
          oursPid: oursNone.pid,
          theirs: readTheirs,
          floors: true,
        },
        {
          name: 'list_directory 100 entries',
          sandbox: 'none',
          ours: listOurs(oursNone),
          oursPid: oursNone.pid,
          theirs: listTheirs,
          floors: true,
        },
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
        const sides: Side[] = [
          { label: `${OURS} (${c.sandbox})`, call: c.ours, pids: () => [c.oursPid] },
          { label: THEIRS, call: c.theirs, pids: () => [theirs.pid] },
        ];
        const read = c.name.startsWith('read_file');
        const floorCall = (s: StdioServer) => (read ? readOurs(s) : listOurs(s));
        if (c.floors) {
          sides.push({ label: FLOOR, call: floorCall(floor), pids: () => [floor.pid] });
          sides.push({ label: FLOOR_WALL, call: floorCall(floorWall), pids: () => [floorWall.pid] });
        }
        const [ours, ref, bottom, walled] = await alternate(sides, options);
        rows.push({
          bench: 'stdio',
          case: `${c.name} [sandbox ${c.sandbox}]`,
          ours: { label: `${OURS} --sandbox ${c.sandbox}`, summary: ours! },
          theirs: { label: THEIRS, summary: ref! },
          concurrency: 1,
          target: c.sandbox === 'none' ? { metric: 'p50-ratio', op: '<=', value: 0.5 } : undefined,
          note: c.sandbox === 'none' ? undefined : 'no target: bwrap is the isolating option, shown for its cost',
        });
        if (bottom && walled) {
          rows.push({
            bench: 'stdio',
            case: `floor: ${c.name}, bare Node with our reply`,
            ours: { label: 'bare Node: stdin lines, JSON.parse, one sync read, our reply (anchors/stdio-floor.ts)', summary: bottom },
            theirs: { label: THEIRS, summary: ref! },
            concurrency: 1,
            note:
              `diagnosis, same rounds as the row above: toolgate's exact reply and outputSchema from bare Node with no checks; ` +
              `floor ÷ theirs is the best p50 ratio that reply allows through this client; ours ÷ floor (p50) ${(ours!.p50 / bottom.p50).toFixed(2)}× is what toolgate's own work costs`,
          });
          rows.push({
            bench: 'stdio',
            case: `floor + the wall's syscalls: ${c.name}`,
            ours: {
              label: "bare Node, our reply, plus the workspace wall's system calls (realpath, open O_NOFOLLOW, readlink /proc/self/fd/N)",
              summary: walled,
            },
            theirs: { label: THEIRS, summary: ref! },
            concurrency: 1,
            note:
              `diagnosis, same rounds: the floor plus the system calls toolgate's path checks make (not their code); ` +
              `walled ÷ floor (p50) ${(walled.p50 / bottom.p50).toFixed(2)}× is what the checks' syscalls cost, ours ÷ walled ${(ours!.p50 / walled.p50).toFixed(2)}× toolgate's code`,
          });
        }
      }
      return rows;
    } finally {
      for (const s of servers) await s.close().catch(() => undefined);
      await fixture.remove();
      await fs.rm(work, { recursive: true, force: true });
    }
  },
};

async function start(servers: StdioServer[], starting: Promise<StdioServer>): Promise<StdioServer> {
  const s = await starting;
  servers.push(s);
  return s;
}
