/**
 * `node dist-bench/bench/ab-stdio.js BASE NEW [--rounds R] [--calls N] [--tool read_file|list_directory] [--exec] [--sdk | --in-process [--thrash BYTES]]`:
 * A/B of one change to the stdio `read_file` path, where the `stdio` benchmark's 20 rounds
 * cannot resolve a few per cent. BASE and NEW are two checkouts' roots (each with its built
 * `dist/`; `cp -r dist /tmp/base/dist` before the change makes BASE). The two run in alternating
 * rounds (order reversed every other round) and the verdict is the median of the per-round
 * ratios NEW ÷ BASE. In A/A runs, 40 rounds of 1,500 calls resolve about ±2.5 %.
 *
 * - Default: end to end. Each tree's `toolgate stdio --sandbox none` is driven by a raw JSON-RPC
 *   client (no SDK) and timed by p50 per round. `--sdk`: by the SDK client instead, as the `stdio`
 *   benchmark drives it (its client work sits between our calls, as it does there).
 * - `--exec`: each tree's `toolgate` bin (as its package.json names it) is executed as a file, as a
 *   global install's is, so the bin decides how node starts (bench/results/2026-11-26-serve-bin-memory.md).
 * - `--in-process`: each tree's dispatcher is built in this process and `dispatchText` is timed
 *   per call. `--thrash BYTES` touches that much memory between calls, untimed, as the client
 *   process does between a server's calls; that cold-cache cost is what the end-to-end gap is
 *   mostly made of (bench/results/2026-11-24-bullmq-3.md).
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { DIR_100, FILE_1K, makeFixture } from './lib/fixtures';
import { connectStdio } from './lib/mcp-stdio';
import { spawnRaw } from './lib/raw-client';
import { median } from './lib/stats';

const ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', TOOLGATE_LOG_LEVEL: 'warn' };
type Call = () => Promise<unknown>;

/** `--rounds`, `--calls`, `--tool` and `--thrash` take a value; `--in-process`, `--sdk` and `--exec` do not; the rest are the two trees. */
function parseArgs(argv: readonly string[]): { trees: string[]; options: Map<string, string> } {
  const trees: string[] = [];
  const options = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--in-process' || a === '--sdk' || a === '--exec') options.set(a.slice(2), 'yes');
    else if (a.startsWith('--')) options.set(a.slice(2), argv[++i] ?? '');
    else trees.push(a);
  }
  return { trees, options };
}

/** The tool timed end to end: read_file of the 1 KiB file, or with `--tool list_directory` the 100-entry directory. */
let tool: { name: string; args: Record<string, unknown> } = { name: 'read_file', args: { path: FILE_1K } };

/** The command line of a tree's `toolgate stdio --sandbox none` on `root`: node and the compiled bin, or with `--exec` the package's bin. */
let stdioCommand = (tree: string, root: string): [string, string[]] => [process.execPath, [path.join(tree, 'dist/bin/toolgate.js'), ...stdioArgs(root)]];
const stdioArgs = (root: string) => ['stdio', '--root', root, '--sandbox', 'none'];
const packageBin = (tree: string) =>
  path.join(tree, (JSON.parse(readFileSync(path.join(tree, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin.toolgate!);

/** One side end to end: a `toolgate stdio` of that tree, called over its pipes. */
async function endToEnd(tree: string, root: string): Promise<{ call: Call; close(): Promise<void> }> {
  const server = await spawnRaw(tree, ...stdioCommand(tree, root), ENV, { initialize: true, cwd: root });
  return { call: () => server.call(tool.name, tool.args), close: () => server.close() };
}

/** One side end to end through the SDK client, as the `stdio` benchmark calls (its outputSchema check included). */
async function endToEndSdk(tree: string, root: string): Promise<{ call: Call; close(): Promise<void> }> {
  const server = await connectStdio(tree, ...stdioCommand(tree, root), ENV, root);
  return { call: () => server.call(tool.name, tool.args), close: () => server.close() };
}

/** One side in process: that tree's dispatcher as `toolgate stdio --sandbox none` builds it. */
async function inProcess(tree: string, root: string): Promise<{ call: Call; close(): Promise<void> }> {
  /* eslint-disable @typescript-eslint/no-require-imports, @typescript-eslint/no-explicit-any -- another tree's build, loaded by path */
  const load = (m: string): any => require(path.join(tree, 'dist', m));
  const config = load('shared/config').loadConfig({ PATH: ENV.PATH }, root);
  const workspace = await load('shared/workspace/workspace').Workspace.open(root, config.limits.maxPathLength);
  const processes = new (load('shared/tools/commands/process-table').ProcessTable)(config.limits);
  const http = load('shared/tools/http/policy').createHttpPolicy(config.httpAllow);
  const runner = new (load('shared/tools/local-runner').LocalToolRunner)({
    sandbox: { workspace, limits: config.limits, processes },
    trusted: { limits: config.limits, http },
  });
  const { createMcpServer, edgeOptions } = load('shared/mcp/server');
  const dispatcher = createMcpServer({
    registry: new (load('shared/tools/registry').ToolRegistry)(load('shared/tools/index').ALL_TOOLS),
    runner,
    ...edgeOptions(config),
    tasks: { ...config.tasks, store: new (load('shared/tasks/memory-store').MemoryTaskStore)() },
  });
  const inflight = new (load('shared/protocol/dispatcher').InFlight)();
  /* eslint-enable @typescript-eslint/no-require-imports, @typescript-eslint/no-explicit-any */
  const caller = { tenant: 'local', permissions: new Set(['file:read']) };
  let id = 0;
  const call = async () => {
    const reply = (await dispatcher.dispatchText(
      JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name: 'read_file', arguments: { path: FILE_1K } } }),
      caller,
      inflight,
    )) as string;
    if (!reply.includes('"structuredContent"')) throw new Error(`read_file failed: ${reply.slice(0, 300)}`);
  };
  return { call, close: async () => undefined };
}

async function main(): Promise<void> {
  const { trees: given, options } = parseArgs(process.argv.slice(2));
  if (given.length !== 2)
    throw new Error('usage: ab-stdio.js BASE NEW [--rounds R] [--calls N] [--tool read_file|list_directory] [--exec] [--sdk | --in-process [--thrash BYTES]]');
  const rounds = Number(options.get('rounds') ?? 40);
  const calls = Number(options.get('calls') ?? 1500);
  const local = options.has('in-process');
  const sdk = options.has('sdk');
  if (options.get('tool') === 'list_directory') tool = { name: 'list_directory', args: { path: DIR_100 } };
  else if (options.has('tool') && options.get('tool') !== 'read_file') throw new Error('--tool: read_file or list_directory');
  if (local && tool.name !== 'read_file') throw new Error('--in-process times read_file only');
  if (options.has('exec')) stdioCommand = (tree, root) => [packageBin(tree), stdioArgs(root)];
  const junk = Buffer.alloc(Number(options.get('thrash') ?? 0));
  const thrash = () => {
    for (let i = 0; i < junk.length; i += 64) junk[i]!++;
  };
  const fixture = await makeFixture('toolgate-ab-');
  const trees = given.map((t) => path.resolve(t));
  const sides = [];
  const start = local ? inProcess : sdk ? endToEndSdk : endToEnd;
  for (const tree of trees) sides.push(await start(tree, fixture.root));
  try {
    const timeOne = async (call: Call): Promise<number> => {
      thrash();
      const t0 = process.hrtime.bigint();
      await call();
      return Number(process.hrtime.bigint() - t0) / 1000;
    };
    for (const side of sides) for (let i = 0; i < 1000; i++) await timeOne(side.call); // V8 settles first
    const p50s: number[][] = [[], []];
    for (let r = 0; r < rounds; r++) {
      for (const k of r % 2 ? [1, 0] : [0, 1]) {
        const times: number[] = [];
        for (let i = 0; i < calls; i++) times.push(await timeOne(sides[k]!.call));
        p50s[k]!.push(median(times));
      }
    }
    const ratios = p50s[1]!.map((x, i) => x / p50s[0]![i]!);
    console.log(
      `${tool.name}, ${local ? 'in process' : sdk ? 'end to end, SDK client' : 'end to end'}${options.has('exec') ? ', bins executed' : ''}${junk.length ? `, ${junk.length} bytes touched between calls` : ''}; ${rounds} rounds of ${calls} calls`,
    );
    console.log(`BASE ${trees[0]}: p50 ${median(p50s[0]!).toFixed(1)} µs (median of rounds)`);
    console.log(`NEW  ${trees[1]}: p50 ${median(p50s[1]!).toFixed(1)} µs (median of rounds)`);
    console.log(`NEW ÷ BASE: ${median(ratios).toFixed(3)} (median of round ratios; an A/A run shows the noise)`);
  } finally {
    for (const side of sides) await side.close();
    await fixture.remove();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
