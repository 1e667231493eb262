/**
 * `node dist-bench/bench/profile-stdio.js [--calls N] [--out DIR]`: CPU profiles (node --cpu-prof)
 * of both stdio servers under the `stdio` benchmark's calls — `toolgate stdio --sandbox none`, its
 * sandbox agent (run alone with the same calls: the server starts it with a clean environment, so
 * no profiler flag can reach it), the walled floor (anchors/stdio-floor.ts: our reply and our path
 * checks' system calls, nothing else) and @modelcontextprotocol/server-filesystem — and a Markdown
 * report of CPU per call and the hottest functions. Only the measured calls count (start-up and
 * warm-up are cut out by time window), so the figures are CPU µs per call whatever the load.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { readProfile, ProfileSummary } from './lib/cpuprofile';
import { DIR_100, FILE_1K, makeFixture } from './lib/fixtures';
import { DIST, REPO_ROOT, TOOLGATE_BIN } from './lib/product';
import { RawServer, spawnRaw } from './lib/raw-client';
import { childrenMap, sched, SchedTotals } from './lib/rss';

const REFERENCE_MAIN = path.join(REPO_ROOT, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
const AGENT_MAIN = path.join(DIST, 'executor/agent/main.js');
const FLOOR_MAIN = path.join(REPO_ROOT, 'dist-bench/bench/anchors/stdio-floor.js');
/** The floor serves whatever listing it is given; the raw client never lists, so an empty one does. */
const FLOOR_TOOLS = path.join(os.tmpdir(), `toolgate-prof-floor-tools-${process.pid}.json`);
const ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', TOOLGATE_LOG_LEVEL: 'warn' };
const nowUs = () => Number(process.hrtime.bigint() / 1000n);

interface Target {
  name: string;
  args: (root: string, profDir: string) => string[];
  initialize: boolean;
  read: (s: RawServer, root: string) => Promise<unknown>;
  list: (s: RawServer, root: string) => Promise<unknown>;
}

const prof = (dir: string) => ['--cpu-prof', '--cpu-prof-interval', '100', '--cpu-prof-dir', dir];

const TARGETS: Target[] = [
  {
    name: 'toolgate stdio (none): server process',
    args: (root, dir) => [...prof(dir), TOOLGATE_BIN, 'stdio', '--root', root, '--sandbox', 'none'],
    initialize: true,
    read: (s) => s.call('read_file', { path: FILE_1K }),
    list: (s) => s.call('list_directory', { path: DIR_100 }),
  },
  {
    name: 'toolgate sandbox agent (alone)',
    args: (root, dir) => [...prof(dir), AGENT_MAIN, '--root', root],
    initialize: false,
    read: (s) => s.call('read_file', { path: FILE_1K }),
    list: (s) => s.call('list_directory', { path: DIR_100 }),
  },
  {
    // The same calls against the walled floor (anchors/stdio-floor.ts): our reply and the wall's
    // system calls, nothing else. Its profile beside ours shows where toolgate's own work goes.
    name: 'stdio floor + the wall (bare Node, our reply)',
    args: (root, dir) => [...prof(dir), FLOOR_MAIN, root, FLOOR_TOOLS, 'wall'],
    initialize: true,
    read: (s) => s.call('read_file', { path: FILE_1K }),
    list: (s) => s.call('list_directory', { path: DIR_100 }),
  },
  {
    name: 'server-filesystem',
    args: (root, dir) => [...prof(dir), REFERENCE_MAIN, root],
    initialize: true,
    read: (s, root) => s.call('read_text_file', { path: path.join(root, FILE_1K) }),
    list: (s, root) => s.call('list_directory', { path: path.join(root, DIR_100) }),
  },
];

interface Phase {
  target: string;
  phase: 'read_file' | 'list_directory';
  calls: number;
  summary: ProfileSummary;
  /** schedstat over the window: the profiled process alone, and its children (toolgate's agent). */
  self: SchedTotals;
  children: SchedTotals;
}

const diff = (a: SchedTotals, b: SchedTotals): SchedTotals => ({ cpuNs: b.cpuNs - a.cpuNs, runDelayNs: b.runDelayNs - a.runDelayNs });

async function profileTarget(t: Target, root: string, calls: number, work: string): Promise<Phase[]> {
  const dir = await fs.mkdtemp(path.join(work, 'prof-'));
  const server = await spawnRaw(t.name, process.execPath, t.args(root, dir), ENV, { initialize: t.initialize, cwd: root });
  const windows: Array<{ phase: Phase['phase']; fromUs: number; toUs: number; self: SchedTotals; children: SchedTotals }> = [];
  const kids = () => childrenMap().get(server.pid) ?? [];
  for (const [phase, fn] of [
    ['read_file', t.read],
    ['list_directory', t.list],
  ] as const) {
    for (let i = 0; i < 300; i++) await fn(server, root); // warm-up: JIT, caches
    const [self0, kids0] = [sched([server.pid]), sched(kids())];
    const fromUs = nowUs();
    for (let i = 0; i < calls; i++) await fn(server, root);
    const toUs = nowUs();
    windows.push({ phase, fromUs, toUs, self: diff(self0, sched([server.pid])), children: diff(kids0, sched(kids())) });
  }
  await server.close();
  const file = (await fs.readdir(dir)).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`${t.name} wrote no profile (did it exit cleanly?)\n${server.stderr()}`);
  const kept = path.join(work, `${t.name.replace(/[^a-z0-9]+/gi, '-')}.cpuprofile`);
  await fs.rename(path.join(dir, file), kept);
  return windows.map((w) => ({ target: t.name, phase: w.phase, calls, summary: readProfile(kept, REPO_ROOT, w), self: w.self, children: w.children }));
}

const us = (ms: number, calls: number) => ((ms * 1000) / calls).toFixed(1);

function render(phases: Phase[], calls: number, load: number[]): string {
  const out: string[] = [
    `# stdio CPU profiles — ${new Date().toISOString().slice(0, 16).replace('T', ' ')}`,
    '',
    `node --cpu-prof (100 µs sampling), ${calls} sequential calls per phase after 300 warm-up calls, bare JSON-RPC client;`,
    `load average ${load.map((v) => v.toFixed(2)).join(' / ')} on ${os.cpus().length} CPUs. Only the measured window counts.`,
    '',
    '- **on-CPU**: schedstat, every thread of the process (main, V8 helpers, libuv pool), per call; for the',
    "  profiled processes this includes the profiler's own 10 kHz sampling, so take CPU figures from the",
    '  `stdio-breakdown` benchmark (no profiler) and use these for where the time goes.',
    "- **run-queue wait**: time those threads were runnable but had no CPU (the load's price), per call.",
    '- **profiled busy**: V8 samples not idle, per call. A sample taken while the thread is preempted in a',
    '  syscall is charged to that call, so this is on-CPU time of the main thread plus its preempted time.',
    '- **child**: the sandbox agent under `toolgate stdio` (the same calls as "agent alone", through the server).',
    '',
    '| process | phase | on-CPU µs/call | run-queue wait µs/call | child on-CPU µs/call | child run-queue µs/call | profiled busy µs/call | GC µs/call | wall µs/call |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const ns = (v: number, calls: number) => (v / 1000 / calls).toFixed(1);
  for (const p of phases) {
    const child = p.children.cpuNs > 0 ? [ns(p.children.cpuNs, p.calls), ns(p.children.runDelayNs, p.calls)] : ['–', '–'];
    out.push(
      `| ${p.target} | ${p.phase} | ${ns(p.self.cpuNs, p.calls)} | ${ns(p.self.runDelayNs, p.calls)} | ${child.join(' | ')} | ${us(p.summary.busyMs, p.calls)} | ${us(p.summary.gcMs, p.calls)} | ${us(p.summary.wallMs, p.calls)} |`,
    );
  }
  out.push('');
  for (const p of phases) {
    out.push(`## ${p.target} — ${p.phase}`, '', 'Self time by place:', '');
    for (const b of p.summary.byPlace.slice(0, 8)) out.push(`- ${b.where}: ${us(b.selfMs, p.calls)} µs/call`);
    out.push('', '| function | where | self µs/call | inclusive µs/call |', '|---|---|---:|---:|');
    const top = [...p.summary.functions].sort((a, b) => b.selfMs - a.selfMs).slice(0, 12);
    for (const f of top) out.push(`| ${f.name} | ${f.where} | ${us(f.selfMs, p.calls)} | ${us(f.totalMs, p.calls)} |`);
    out.push('', 'Project functions by inclusive time:', '', '| function | where | inclusive µs/call |', '|---|---|---:|');
    const ours = p.summary.functions
      .filter((f) => !f.where.startsWith('pkg:') && !f.where.startsWith('node:') && !f.where.startsWith('(') && f.where.includes('/'))
      .sort((a, b) => b.totalMs - a.totalMs)
      .slice(0, 15);
    for (const f of ours) out.push(`| ${f.name} | ${f.where} | ${us(f.totalMs, p.calls)} |`);
    out.push('');
  }
  return out.join('\n');
}

async function main(argv: readonly string[]): Promise<void> {
  const calls = Number(argv[argv.indexOf('--calls') + 1] ?? 0) || 3000;
  const outDir = argv.includes('--out') ? argv[argv.indexOf('--out') + 1]! : path.join(REPO_ROOT, 'bench/results');
  const fixture = await makeFixture();
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-prof-'));
  try {
    await fs.writeFile(FLOOR_TOOLS, '[]');
    const phases: Phase[] = [];
    for (const t of TARGETS) {
      process.stderr.write(`profile: ${t.name}\n`);
      phases.push(...(await profileTarget(t, fixture.root, calls, work)));
    }
    const report = render(phases, calls, os.loadavg());
    await fs.mkdir(outDir, { recursive: true });
    const file = path.join(outDir, `${new Date().toISOString().slice(0, 10)}-profile-stdio.md`);
    await fs.writeFile(file, report);
    process.stdout.write(`${report}\n`);
    process.stderr.write(`profile: wrote ${file}; raw profiles kept in ${work}\n`);
  } finally {
    await fixture.remove();
    await fs.rm(FLOOR_TOOLS, { force: true });
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`profile: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
