/**
 * The printed table: for each case three lines — ours, theirs, ratio (ours ÷ theirs) — with
 * p50, p99, calls/s and peak RSS, and the target verdict on the ratio line.
 */
import { median } from './stats';
import type { Row, Summary, Target } from './types';

export function ms(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return '–';
  if (v < 1) return v.toFixed(3);
  if (v < 10) return v.toFixed(2);
  if (v < 1000) return v.toFixed(1);
  return v.toFixed(0);
}

export function rate(v: number | undefined): string {
  return v === undefined || !Number.isFinite(v) || v === 0 ? '–' : v >= 100 ? Math.round(v).toString() : v.toFixed(1);
}

export function mib(v: number | undefined): string {
  return v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(1);
}

export function ratio(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 || a === 0 ? undefined : a / b;
}

export function fmtRatio(v: number | undefined): string {
  return v === undefined ? '–' : `${v.toFixed(2)}×`;
}

const METRIC_TEXT: Record<Target['metric'], string> = {
  'p50-ratio': 'p50 ratio',
  'p99-ratio': 'p99 ratio',
  'throughput-ratio': 'calls/s ratio',
  'p50-ms': 'p50 ms',
  'p50-added-ms': 'p50 added ms',
  'rss-mib': 'peak RSS MiB',
};

/** Fills in `actual` and `met` from the row's figures. */
export function judge(row: Row): void {
  const t = row.target;
  if (!t) return;
  const o = row.ours.summary;
  const th = row.theirs?.summary;
  let actual: number | undefined;
  if (t.metric === 'p50-ratio' || t.metric === 'throughput-ratio') {
    const mine = t.metric === 'p50-ratio' ? o.roundP50 : o.roundCallsPerSec;
    const other = t.metric === 'p50-ratio' ? th?.roundP50 : th?.roundCallsPerSec;
    const pooled = t.metric === 'p50-ratio' ? ratio(o.p50, th?.p50) : ratio(o.callsPerSec, th?.callsPerSec);
    const perRound = (other ?? []).map((v, i) => ratio(mine[i], v)).filter((v): v is number => v !== undefined);
    if (perRound.length >= 2) {
      actual = median(perRound);
      t.basis = `median of ${perRound.length} round ratios; pooled ${pooled?.toFixed(2)}`;
    } else actual = pooled;
  } else if (t.metric === 'p50-added-ms') {
    const added = (th?.roundP50 ?? []).map((v, i) => (o.roundP50[i] ?? NaN) - v).filter(Number.isFinite);
    actual = added.length > 0 ? median(added) : undefined;
    t.basis = `median of ${added.length} round differences; pooled p50s ${ms(o.p50)} − ${ms(th?.p50)} ms`;
  } else if (t.metric === 'p99-ratio') {
    // A tail needs every call: judged on the pooled p99s (a round has too few calls for its own).
    actual = ratio(o.p99, th?.p99);
    t.basis = `pooled p99 ${ms(o.p99)} ÷ ${ms(th?.p99)} ms`;
  } else actual = t.metric === 'p50-ms' ? o.p50 : o.peakRssMiB;
  if (actual === undefined || !Number.isFinite(actual)) return;
  t.actual = actual;
  t.met = t.op === '<=' ? actual <= t.value : actual >= t.value;
}

export function targetText(t: Target | undefined): string {
  if (!t) return '';
  const head = `${METRIC_TEXT[t.metric]} ${t.op === '<=' ? '≤' : '≥'} ${t.value}`;
  if (t.met === undefined) return `${head}: no figure`;
  const actual = t.metric === 'p50-ms' || t.metric === 'p50-added-ms' ? ms(t.actual) : t.metric === 'rss-mib' ? mib(t.actual) : (t.actual ?? 0).toFixed(2);
  return `${head}: ${t.met ? 'met' : 'MISSED'} (${actual}${t.basis ? `, ${t.basis}` : ''})`;
}

export function usCell(v: number | undefined): string {
  return v === undefined || !Number.isFinite(v) ? '–' : v >= 100 ? Math.round(v).toString() : v.toFixed(1);
}

function cells(s: Summary): string[] {
  return [ms(s.p50), ms(s.p99), rate(s.callsPerSec), usCell(s.cpuUsPerCall), mib(s.peakRssMiB)];
}

function pad(cols: string[][]): string[] {
  const widths = cols[0]!.map((_, i) => Math.max(...cols.map((c) => [...(c[i] ?? '')].length)));
  return cols.map((c) =>
    c
      .map((cell, i) => (i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join('  ')
      .trimEnd(),
  );
}

export function renderTable(rows: readonly Row[]): string {
  const out: string[] = [];
  for (const row of rows) {
    if (row.ours.summary.n === 0 && (row.theirs?.summary.n ?? 0) === 0) {
      out.push(...memoryLines(row), '');
      continue;
    }
    const grid: string[][] = [
      ['', row.concurrency > 1 ? `${row.concurrency} concurrent callers` : 'sequential', 'p50 ms', 'p99 ms', 'calls/s', 'CPU µs/call', 'peak RSS MiB'],
    ];
    grid.push(['ours', row.ours.label, ...cells(row.ours.summary)]);
    if (row.theirs) {
      const o = row.ours.summary;
      const t = row.theirs.summary;
      grid.push(['theirs', row.theirs.label, ...cells(t)]);
      grid.push([
        'ratio',
        'ours ÷ theirs',
        fmtRatio(ratio(o.p50, t.p50)),
        fmtRatio(ratio(o.p99, t.p99)),
        fmtRatio(ratio(o.callsPerSec, t.callsPerSec)),
        fmtRatio(ratio(o.cpuUsPerCall, t.cpuUsPerCall)),
        fmtRatio(ratio(o.peakRssMiB, t.peakRssMiB)),
      ]);
    }
    out.push(`${row.bench} · ${row.case}`);
    out.push(...pad(grid).map((l) => `  ${l}`));
    const errors = row.ours.summary.errors + (row.theirs?.summary.errors ?? 0);
    const tail = [targetText(row.target), row.note ?? '', errors ? `${errors} failed calls` : ''].filter(Boolean).join('; ');
    if (tail) out.push(`  → ${tail}`);
    out.push('');
  }
  return out.join('\n');
}

/** A row with no calls (a memory reading): label and RSS only. */
function memoryLines(row: Row): string[] {
  const grid: string[][] = [['', row.concurrency > 1 ? `under ${row.concurrency} concurrent callers` : '', 'RSS MiB']];
  grid.push(['ours', row.ours.label, mib(row.ours.summary.peakRssMiB)]);
  if (row.theirs) {
    grid.push(['theirs', row.theirs.label, mib(row.theirs.summary.peakRssMiB)]);
    grid.push(['ratio', 'ours ÷ theirs', fmtRatio(ratio(row.ours.summary.peakRssMiB, row.theirs.summary.peakRssMiB))]);
  }
  const out = [`${row.bench} · ${row.case}`, ...pad(grid).map((l) => `  ${l}`)];
  const tail = [targetText(row.target), row.note ?? ''].filter(Boolean).join('; ');
  if (tail) out.push(`  → ${tail}`);
  return out;
}

/** One line per case, for the end of a run: the figures side by side and the verdict. */
export function renderSummary(rows: readonly Row[]): string {
  const grid: string[][] = [['case', 'callers', 'p50 ours', 'p50 theirs', 'ratio', 'calls/s ours', 'theirs', 'ratio', 'RSS ours', 'theirs', 'target']];
  for (const r of rows) {
    const o = r.ours.summary;
    const t = r.theirs?.summary;
    grid.push([
      `${r.bench} · ${r.case}`,
      String(r.concurrency),
      ms(o.p50),
      ms(t?.p50),
      fmtRatio(ratio(o.p50, t?.p50)),
      rate(o.callsPerSec),
      rate(t?.callsPerSec),
      fmtRatio(ratio(o.callsPerSec, t?.callsPerSec)),
      mib(o.peakRssMiB),
      mib(t?.peakRssMiB),
      targetText(r.target),
    ]);
  }
  const widths = grid[0]!.map((_, i) => Math.max(...grid.map((c) => [...(c[i] ?? '')].length)));
  return (
    grid
      .map((c) =>
        c
          .map((cell, i) => (i === 0 || i === c.length - 1 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}
