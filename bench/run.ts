/**
 * `npm run bench [-- --quick] [-- --only NAME]`: every benchmark runs our path and its anchor in
 * the same run, alternating, prints ours / theirs / ratio, and writes bench/results/<date>.{json,md,svg}.
 * The product measured is the normal build in dist/ (the bench script builds it first).
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { BENCH_USAGE, parseArgs } from './lib/args';
import { DIST, REPO_ROOT } from './lib/product';
import { gitState, RunInfo, writeReport } from './lib/report';
import { judge, renderSummary, renderTable } from './lib/table';
import type { Benchmark, BenchContext, Row, Skipped } from './lib/types';
import { BENCHMARKS } from './benchmarks';

const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

async function main(argv: readonly string[]): Promise<number> {
  const args = parseArgs(argv);
  const ctx: BenchContext = { quick: args.quick, dist: DIST, root: REPO_ROOT, log };
  const unknown = (args.only ?? []).filter((n) => !BENCHMARKS.some((b) => b.name === n));
  if (unknown.length) throw new Error(`unknown benchmark ${unknown.join(', ')}; known: ${BENCHMARKS.map((b) => b.name).join(', ')}`);
  const chosen = BENCHMARKS.filter((b) => !args.only || args.only.includes(b.name));

  if (args.list) {
    for (const b of BENCHMARKS) {
      const why = await b.unavailable(ctx);
      process.stdout.write(`${b.name.padEnd(14)} ${why ? `skipped here: ${why}` : 'runs here'}\n               ${b.title}\n`);
    }
    return 0;
  }

  const load: number[][] = [os.loadavg()];
  const loadTimer = setInterval(() => load.push(os.loadavg()), 5000);
  loadTimer.unref();
  const startedAt = new Date();
  const rows: Row[] = [];
  const skipped: Skipped[] = [];
  for (const b of chosen) {
    const why = await b.unavailable(ctx);
    if (why) {
      log(`SKIPPED ${b.name}: ${why}`);
      skipped.push({ bench: b.name, reason: why });
      continue;
    }
    log(`${b.name}: ${b.title}`);
    const t0 = Date.now();
    try {
      const got = await runOne(b, ctx);
      got.forEach(judge);
      rows.push(...got);
      process.stdout.write(`${renderTable(got)}\n`);
      log(`${b.name}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    } catch (err) {
      const reason = `failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`;
      log(`${b.name} ${reason}`);
      skipped.push({ bench: b.name, reason });
    }
  }
  clearInterval(loadTimer);
  load.push(os.loadavg());

  const info: RunInfo = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    quick: args.quick,
    only: args.only,
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    loadAverage: load.map((l) => l.map((v) => Math.round(v * 100) / 100)),
    ...(await gitState(REPO_ROOT)),
  };
  const ones = load.map((l) => l[0]!);
  const sorted = [...ones].sort((a, b) => a - b);
  const loadText = `1-min load average ${ones[0]!.toFixed(2)} → ${ones[ones.length - 1]!.toFixed(2)} (median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(2)}, max ${sorted[sorted.length - 1]!.toFixed(2)}) on ${os.cpus().length} CPUs`;
  process.stdout.write(`\n=== summary (${args.quick ? 'quick' : 'full'} run; ${loadText}) ===\n\n`);
  process.stdout.write(renderSummary(rows));
  for (const s of skipped) process.stdout.write(`SKIPPED ${s.bench}: ${s.reason.split('\n')[0]}\n`);
  if (args.write) {
    const files = await writeReport(args.out ?? path.join(REPO_ROOT, 'bench/results'), info, rows, skipped);
    log(`wrote ${files.map((f) => path.relative(process.cwd(), f)).join(', ')}`);
  }
  return skipped.some((s) => s.reason.startsWith('failed')) ? 1 : 0;
}

/** A benchmark must not leave the run hanging: each has a generous ceiling. */
async function runOne(b: Benchmark, ctx: BenchContext): Promise<Row[]> {
  const limitMs = (ctx.quick ? 5 : 30) * 60_000;
  let timer: NodeJS.Timeout | undefined;
  const ceiling = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not finish within ${limitMs / 60_000} min`)), limitMs);
  });
  try {
    return await Promise.race([b.run(ctx), ceiling]);
  } finally {
    clearTimeout(timer);
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`${message.includes('Usage:') ? '' : 'bench: '}${message}\n`);
    process.exit(message === BENCH_USAGE ? 0 : 2);
  },
);
