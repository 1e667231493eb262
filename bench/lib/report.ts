/**
 * The written report: <date>.json (every figure, per-round p50s, a latency sample), <date>.md
 * (the table, the conditions, the verdicts, the notes) and <date>.svg (latency distributions).
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { run } from './availability';
import { renderSvg } from './svg';
import { fmtRatio, mib, ms, rate, ratio, targetText, usCell } from './table';
import type { Row, Skipped } from './types';

export interface RunInfo {
  startedAt: string;
  finishedAt: string;
  quick: boolean;
  only: string[] | undefined;
  node: string;
  cpus: number;
  cpuModel: string;
  /** os.loadavg() at the start, every 5 s, and at the end. */
  loadAverage: number[][];
  commit: string;
  dirty: boolean;
}

export async function gitState(root: string): Promise<{ commit: string; dirty: boolean }> {
  const head = await run('git', ['-C', root, 'rev-parse', '--short', 'HEAD']);
  const status = await run('git', ['-C', root, 'status', '--porcelain', '--untracked-files=no']);
  return { commit: head.stdout.trim() || 'unknown', dirty: status.stdout.trim().length > 0 };
}

function baseName(info: RunInfo): string {
  const date = info.startedAt.slice(0, 10);
  return [date, info.quick ? 'quick' : '', info.only ? `only-${info.only.join('-')}` : ''].filter(Boolean).join('-');
}

export async function writeReport(dir: string, info: RunInfo, rows: readonly Row[], skipped: readonly Skipped[]): Promise<string[]> {
  await fs.mkdir(dir, { recursive: true });
  const base = path.join(dir, baseName(info));
  const files = [`${base}.json`, `${base}.md`, `${base}.svg`];
  await fs.writeFile(files[0]!, `${JSON.stringify({ info, rows, skipped }, null, 1)}\n`);
  await fs.writeFile(files[1]!, renderMarkdown(info, rows, skipped, path.basename(files[2]!)));
  await fs.writeFile(files[2]!, renderSvg(rows, `toolgate bench ${info.startedAt.slice(0, 16).replace('T', ' ')} (${info.quick ? 'quick' : 'full'})`));
  return files;
}

function loadLine(info: RunInfo): string {
  const ones = info.loadAverage.map((l) => l[0] ?? 0);
  const sorted = [...ones].sort((a, b) => a - b);
  return `1-min load average from ${ones[0]?.toFixed(2)} to ${ones[ones.length - 1]?.toFixed(2)} (min ${sorted[0]?.toFixed(2)}, median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(2)}, max ${sorted[sorted.length - 1]?.toFixed(2)}) on ${info.cpus} CPUs`;
}

export function renderMarkdown(info: RunInfo, rows: readonly Row[], skipped: readonly Skipped[], svgName: string): string {
  const out: string[] = [];
  out.push(`# toolgate benchmarks — ${info.startedAt.slice(0, 10)} (${info.quick ? 'quick' : 'full'} run)`, '');
  out.push(
    `- Commit \`${info.commit}\`${info.dirty ? ' (working tree had uncommitted changes)' : ''}, Node ${info.node}, ${info.cpuModel}.`,
    `- ${loadLine(info)}: the machine was shared, so absolute figures are noisy; each pair ran in alternating rounds in the same run and the ratios are what to read.`,
    `- Ran ${info.startedAt} → ${info.finishedAt}.`,
    `- p50/p99 are over all measured calls pooled across rounds (warm-up excluded); calls/s is the median of the rounds' rates; CPU µs/call is the on-CPU time of the side's process tree (every thread, /proc/PID/task/*/schedstat) during its own rounds ÷ its calls; run-queue wait is the time those threads were runnable but waiting for a CPU (what the machine's load adds); peak RSS is the largest sum of VmRSS over the side's process tree, sampled every 100 ms.`,
    '',
  );
  out.push('| benchmark | case | callers | side | p50 ms | p99 ms | calls/s | CPU µs/call | run-queue wait µs/call | peak RSS MiB | target |');
  out.push('|---|---|---|---|---:|---:|---:|---:|---:|---:|---|');
  for (const r of rows) {
    const o = r.ours.summary;
    const callers = r.concurrency > 1 ? String(r.concurrency) : '1';
    out.push(
      `| ${r.bench} | ${r.case} | ${callers} | **ours**: ${r.ours.label} | ${ms(o.p50)} | ${ms(o.p99)} | ${rate(o.callsPerSec)} | ${usCell(o.cpuUsPerCall)} | ${usCell(o.runDelayUsPerCall)} | ${mib(o.peakRssMiB)} | ${targetText(r.target)} |`,
    );
    if (r.theirs) {
      const t = r.theirs.summary;
      out.push(
        `| | | | theirs: ${r.theirs.label} | ${ms(t.p50)} | ${ms(t.p99)} | ${rate(t.callsPerSec)} | ${usCell(t.cpuUsPerCall)} | ${usCell(t.runDelayUsPerCall)} | ${mib(t.peakRssMiB)} | |`,
      );
      out.push(
        `| | | | *ratio* | ${fmtRatio(ratio(o.p50, t.p50))} | ${fmtRatio(ratio(o.p99, t.p99))} | ${fmtRatio(ratio(o.callsPerSec, t.callsPerSec))} | ${fmtRatio(ratio(o.cpuUsPerCall, t.cpuUsPerCall))} | ${fmtRatio(ratio(o.runDelayUsPerCall, t.runDelayUsPerCall))} | ${fmtRatio(ratio(o.peakRssMiB, t.peakRssMiB))} | |`,
      );
    }
  }
  out.push('');
  const noted = rows.filter((r) => r.note || r.ours.summary.errors || r.theirs?.summary.errors);
  if (noted.length) {
    out.push('## Notes', '');
    for (const r of noted) {
      const errors = r.ours.summary.errors + (r.theirs?.summary.errors ?? 0);
      out.push(`- ${r.bench} · ${r.case}: ${[r.note, errors ? `${errors} failed calls` : ''].filter(Boolean).join('; ')}`);
    }
    out.push('');
  }
  out.push('## Round by round (p50 ms per round, ours / theirs)', '');
  for (const r of rows) {
    if (r.ours.summary.roundP50.length < 2) continue;
    const pairs = r.ours.summary.roundP50.map((v, i) => `${ms(v)}/${ms(r.theirs?.summary.roundP50[i])}`);
    out.push(`- ${r.bench} · ${r.case}${r.concurrency > 1 ? ` (${r.concurrency} callers)` : ''}: ${pairs.join(', ')}`);
  }
  out.push('');
  if (skipped.length) {
    out.push('## Skipped', '');
    for (const s of skipped) out.push(`- **${s.bench}**: ${s.reason.split('\n')[0]}`);
    out.push('');
  }
  out.push(`## Latency distributions`, '', `![latency distributions](${svgName})`, '');
  return out.join('\n');
}
