/** The summary `npm run load` prints and the JSON it writes (load-<date>.json, load-faults-<date>.json). */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { percentile } from '../lib/stats';
import { ms } from '../lib/table';
import type { LoadArgs } from './args';
import type { DiskCheck } from './check';
import type { FaultTimeline } from './faults';
import { newTally, RunResult, Tally } from './run';
import { LOAD_TOOLS, Outcome } from './workload';

export interface LoadReport {
  args: LoadArgs;
  startedAt: Date;
  result: RunResult;
  disk: DiskCheck;
  peakRssMiB: { gateway: number | undefined; executors: number | undefined };
  /** Under --faults. */
  faults?: FaultTimeline;
}

/** The longest time with no successful reply during the load, and when it began (ms from the load's start). */
export function longestStall(result: RunResult, okTimes = result.okTimes): { ms: number; fromMs: number } {
  const end = result.startedAt + result.wallMs;
  let previous = result.startedAt;
  let longest = { ms: 0, fromMs: 0 };
  for (const t of [...okTimes.filter((x) => x <= end), end].sort((a, b) => a - b)) {
    if (t - previous > longest.ms) longest = { ms: t - previous, fromMs: previous - result.startedAt };
    previous = t;
  }
  return longest;
}

/** The longest stall any one tenant saw. */
export function longestTenantStall(result: RunResult): { tenant: string; ms: number; fromMs: number } {
  let worst = { tenant: '', ms: 0, fromMs: 0 };
  for (const [tenant, times] of result.okTimesOf) {
    const stall = longestStall(result, times);
    if (stall.ms > worst.ms) worst = { tenant, ...stall };
  }
  return worst;
}

export function totals(result: RunResult): Tally {
  const all = newTally();
  for (const t of result.byTool.values()) {
    all.calls += t.calls;
    for (const k of Object.keys(all.outcomes) as Outcome[]) all.outcomes[k] += t.outcomes[k];
    all.latencies.push(...t.latencies);
  }
  return all;
}

export function passed(r: LoadReport): boolean {
  const all = totals(r.result);
  const common =
    all.outcomes.lost === 0 &&
    all.outcomes.crossed === 0 &&
    r.disk.doubled === 0 &&
    r.result.notMade === 0 &&
    r.disk.found === r.disk.expected &&
    r.disk.problems.length === 0;
  if (!r.faults) return common && all.outcomes.error === 0;
  // Under faults honest errors (-32006, -32010) are expected; what must hold is recovery.
  const { afterRecovery } = r.result;
  return common && r.faults.error === undefined && r.faults.takenOverAt !== undefined && afterRecovery.failed === 0 && afterRecovery.ok > 0;
}

function pad(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length)));
  return rows.map((row) => row.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '));
}

const seconds = (msValue: number) => `${(msValue / 1000).toFixed(1)} s`;

function faultLines(r: LoadReport): string[] {
  const f = r.faults!;
  const at = (t: number | undefined) => (t === undefined ? '–' : `t=${seconds(t - r.result.startedAt)}`);
  const between = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? '–' : seconds(b - a));
  const stall = longestStall(r.result);
  const tenantStall = longestTenantStall(r.result);
  const codes = [...r.result.errorsByCode].sort((a, b) => b[1] - a[1]).map(([code, n]) => `${code} ×${n}`);
  const { afterRecovery } = r.result;
  return [
    `  Redis master :${f.oldMasterPort ?? '?'} SIGKILLed at ${at(f.masterKilledAt)}; replica :${f.newMasterPort ?? '?'} promoted ${between(f.masterKilledAt, f.promotedAt)} later`,
    `  executor ${f.killedExecutor ?? '?'} (holding shard 0) SIGKILLed at ${at(f.executorKilledAt)}; ${f.takenOverBy ?? '?'} took shard 0 over ${between(f.executorKilledAt, f.takenOverAt)} later`,
    ...(f.error ? [`  the fault sequence stopped: ${f.error}`] : []),
    `  errors by code: ${codes.length ? codes.join(', ') : 'none'} (honest -32006 / -32010 answers during a fault are expected)`,
    `  longest stall (no successful reply): ${seconds(stall.ms)} from t=${seconds(stall.fromMs)}; ` +
      `of one tenant: ${seconds(tenantStall.ms)} from t=${seconds(tenantStall.fromMs)} (${tenantStall.tenant})`,
    `  after recovery (calls started once shard 0 was taken over, a last call per tenant included): ${afterRecovery.ok} ok, ${afterRecovery.failed} failed`,
    ...afterRecovery.examples.map((e) => `  after recovery: ${e}`),
  ];
}

export function summary(r: LoadReport): string[] {
  const { args, result, disk } = r;
  const all = totals(result);
  const row = (name: string, t: Tally) => {
    const sorted = [...t.latencies].sort((a, b) => a - b);
    return [
      name,
      String(t.calls),
      String(t.outcomes.ok),
      String(t.outcomes.lost),
      String(t.outcomes.crossed),
      String(t.outcomes.error),
      ms(percentile(sorted, 0.5)),
      ms(percentile(sorted, 0.99)),
    ];
  };
  const topology = r.faults
    ? `Redis under Sentinel · ${args.executors} executors leasing ${args.faults!.shards} shards`
    : `${args.executors} executors (one shard each)`;
  const ok = passed(r);
  return [
    `toolgate load${r.faults ? ' --faults' : ''} · ${args.calls} calls · ${args.clients} callers · ${args.tenants} tenants · gateway on BullMQ · ${topology} · sandbox ${args.sandbox}`,
    ...pad([
      ['tool', 'calls', 'ok', 'lost', 'crossed', 'errors', 'p50 ms', 'p99 ms'],
      ...LOAD_TOOLS.map((t) => row(t, result.byTool.get(t)!)),
      row('all', all),
    ]).map((l) => `  ${l}`),
    `  ${Math.round((all.calls * 1000) / result.wallMs)} calls/s over ${seconds(result.wallMs)}; peak RSS gateway ${r.peakRssMiB.gateway?.toFixed(1) ?? '–'} MiB, executors with sandboxes ${r.peakRssMiB.executors?.toFixed(1) ?? '–'} MiB`,
    `  on disk: ${disk.found} of ${disk.expected} acknowledged write directories; ledger ${disk.ledgerLines} lines, ${disk.doubled} command(s) run twice${disk.problems.length ? ` — ${disk.problems.length} problem(s)` : ''}`,
    ...(r.faults ? faultLines(r) : []),
    ...(result.notMade ? [`  ${result.notMade} calls were never made: --max-seconds ${args.maxSeconds} passed first`] : []),
    ...(['lost', 'crossed', 'error'] as const).flatMap((k) => result.examples[k].map((e) => `  ${k}: ${e}`)),
    ...disk.problems.map((p) => `  disk: ${p}`),
    `  → ${ok ? 'PASS' : 'FAIL'}: lost ${all.outcomes.lost}, crossed ${all.outcomes.crossed}, doubled ${disk.doubled}, ` +
      (r.faults ? `after recovery ${result.afterRecovery.ok} ok / ${result.afterRecovery.failed} failed` : `errors ${all.outcomes.error}`),
  ];
}

/** Writes the JSON beside the other results; returns its path. */
export async function writeJson(r: LoadReport): Promise<string> {
  const { args, result, disk } = r;
  await fs.mkdir(args.out, { recursive: true });
  const file = path.join(args.out, `load${r.faults ? '-faults' : ''}-${r.startedAt.toISOString().slice(0, 10)}.json`);
  const all = totals(result);
  const tools = Object.fromEntries(
    [...result.byTool, ['all', all] as const].map(([name, t]) => {
      const sorted = [...t.latencies].sort((a, b) => a - b);
      return [
        name,
        {
          calls: t.calls,
          ...t.outcomes,
          p50Ms: percentile(sorted, 0.5),
          p90Ms: percentile(sorted, 0.9),
          p99Ms: percentile(sorted, 0.99),
          maxMs: sorted[sorted.length - 1] ?? null,
        },
      ];
    }),
  );
  const since = (t: number | undefined) => (t === undefined ? null : t - result.startedAt);
  const f = r.faults;
  const report = {
    info: { startedAt: r.startedAt.toISOString(), finishedAt: new Date().toISOString(), node: process.version, args: { ...args, out: undefined } },
    passed: passed(r),
    lost: all.outcomes.lost,
    crossed: all.outcomes.crossed,
    doubled: disk.doubled,
    errors: all.outcomes.error,
    errorsByCode: Object.fromEntries(result.errorsByCode),
    notMade: result.notMade,
    callsPerSec: (all.calls * 1000) / result.wallMs,
    wallMs: result.wallMs,
    peakRssMiB: { gateway: r.peakRssMiB.gateway ?? null, executors: r.peakRssMiB.executors ?? null },
    disk,
    ...(f
      ? {
          faults: {
            // ms from the load's start
            masterKilledAtMs: since(f.masterKilledAt),
            promotionMs: f.promotedAt !== undefined && f.masterKilledAt !== undefined ? f.promotedAt - f.masterKilledAt : null,
            oldMasterPort: f.oldMasterPort ?? null,
            newMasterPort: f.newMasterPort ?? null,
            executorKilledAtMs: since(f.executorKilledAt),
            killedExecutor: f.killedExecutor ?? null,
            takeoverMs: f.takenOverAt !== undefined && f.executorKilledAt !== undefined ? f.takenOverAt - f.executorKilledAt : null,
            takenOverBy: f.takenOverBy ?? null,
            error: f.error ?? null,
          },
          longestStall: longestStall(result),
          longestTenantStall: longestTenantStall(result),
          afterRecovery: result.afterRecovery,
        }
      : {}),
    tools,
    examples: result.examples,
  };
  await fs.writeFile(file, `${JSON.stringify(report, null, 1)}\n`);
  return file;
}
