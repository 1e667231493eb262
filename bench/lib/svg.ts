/**
 * Latency distributions as one SVG: a panel per case, ours above theirs on a shared log axis;
 * each strip is the sampled calls as dots, a box from p25 to p75, a tick at p50 and whiskers to
 * p1 and p99. No dependencies: plain SVG text.
 */
import { percentile } from './stats';
import type { Row, Summary } from './types';

const WIDTH = 900;
const LEFT = 275;
const RIGHT = 30;
const PANEL = 84;
const TOP = 40;
const OURS = '#1f77b4';
const THEIRS = '#ff7f0e';

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fmt = (v: number) => (v < 1 ? v.toFixed(2) : v < 10 ? v.toFixed(1) : v.toFixed(0));

function ticks(lo: number, hi: number): number[] {
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v >= lo && v <= hi) out.push(v);
    }
  }
  return out;
}

function strip(s: Summary, y: number, color: string, x: (v: number) => number, label: string): string[] {
  const sorted = s.sample;
  const q = (p: number) => percentile(sorted, p);
  const parts: string[] = [];
  // A hundred dots per strip is enough to see the shape; one group carries their style.
  const step = Math.max(1, Math.ceil(sorted.length / 100));
  const dots = sorted
    .filter((_, i) => i % step === 0)
    .map((v, i) => `<circle cx="${x(v).toFixed(1)}" cy="${(y - 7 + ((i * 7919) % 15)).toFixed(0)}" r="1.3"/>`);
  parts.push(`<g fill="${color}" fill-opacity="0.3">${dots.join('')}</g>`);
  parts.push(`<line x1="${x(q(0.01)).toFixed(1)}" x2="${x(q(0.99)).toFixed(1)}" y1="${y}" y2="${y}" stroke="${color}" stroke-width="1"/>`);
  parts.push(
    `<rect x="${x(q(0.25)).toFixed(1)}" y="${y - 6}" width="${Math.max(1, x(q(0.75)) - x(q(0.25))).toFixed(1)}" height="12" fill="${color}" fill-opacity="0.35" stroke="${color}"/>`,
  );
  parts.push(`<line x1="${x(s.p50).toFixed(1)}" x2="${x(s.p50).toFixed(1)}" y1="${y - 9}" y2="${y + 9}" stroke="${color}" stroke-width="2.5"/>`);
  // The margin holds about 44 characters at this size: long labels are cut, the p50 always shows.
  const short = label.length > 30 ? `${label.slice(0, 29)}…` : label;
  parts.push(`<text x="${LEFT - 8}" y="${y + 4}" text-anchor="end" font-size="10" fill="${color}">${esc(short)} · p50 ${fmt(s.p50)} ms</text>`);
  return parts;
}

export function renderSvg(rows: readonly Row[], title: string): string {
  const drawn = rows.filter((r) => r.ours.summary.sample.length > 0 && r.ours.summary.sample[0]! > 0);
  const height = TOP + drawn.length * PANEL + 30;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="22" font-size="15" font-weight="bold">${esc(title)}: latency per call (ms, log scale); box p25–p75, tick p50, whiskers p1–p99</text>`,
  ];
  drawn.forEach((row, i) => {
    const y0 = TOP + i * PANEL;
    const all = [...row.ours.summary.sample, ...(row.theirs?.summary.sample ?? [])].filter((v) => v > 0);
    const lo = Math.min(...all) / 1.15;
    const hi = Math.max(...all) * 1.15;
    const x = (v: number) => LEFT + ((Math.log(Math.max(v, lo)) - Math.log(lo)) / (Math.log(hi) - Math.log(lo))) * (WIDTH - LEFT - RIGHT);
    parts.push(
      `<text x="10" y="${y0 + 12}" font-size="12" font-weight="bold">${esc(`${row.bench} · ${row.case}${row.concurrency > 1 ? ` · ${row.concurrency} callers` : ''}`)}</text>`,
    );
    for (const t of ticks(lo, hi)) {
      parts.push(`<line x1="${x(t).toFixed(1)}" x2="${x(t).toFixed(1)}" y1="${y0 + 18}" y2="${y0 + 66}" stroke="#ddd"/>`);
      parts.push(`<text x="${x(t).toFixed(1)}" y="${y0 + 77}" font-size="9" text-anchor="middle" fill="#666">${fmt(t)}</text>`);
    }
    parts.push(...strip(row.ours.summary, y0 + 30, OURS, x, row.ours.label));
    if (row.theirs) parts.push(...strip(row.theirs.summary, y0 + 54, THEIRS, x, row.theirs.label));
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
