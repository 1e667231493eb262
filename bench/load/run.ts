/**
 * The callers of `npm run load`: each its own keep-alive connection, one call at a time, every
 * call judged on its answer (bench/load/workload.ts). What is kept: per tool counts and latencies,
 * errors by code, the time of every success (for the longest stall), what was acknowledged (read
 * back from disk afterwards) and, under faults, how calls started after the recovery did.
 */
import * as path from 'node:path';
import { Client } from 'undici';
import type { LoadArgs } from './args';
import type { FaultDriver } from './faults';
import type { LoadStack } from './stack';
import { CallerScript, echoCall, judge, LOAD_TOOLS, LoadTool, Outcome, PlannedCall, Verdict } from './workload';

export interface Tally {
  calls: number;
  outcomes: Record<Outcome, number>;
  /** Latency of every call that got a reply, ms. */
  latencies: number[];
}

export const newTally = (): Tally => ({ calls: 0, outcomes: { ok: 0, error: 0, crossed: 0, lost: 0 }, latencies: [] });
const MAX_EXAMPLES = 5;
/** A caller pauses this long after a failed call, as a client that retries would: during a fault, errors at full speed would only count themselves. */
const PAUSE_AFTER_ERROR_MS = 100;

export interface RunResult {
  byTool: Map<LoadTool, Tally>;
  examples: Record<Exclude<Outcome, 'ok'>, string[]>;
  /** Errors by code (JSON-RPC code, `isError`, `HTTP <status>`). */
  errorsByCode: Map<string, number>;
  /** Per tenant: directories of writes that were acknowledged. */
  acknowledged: Map<string, Set<string>>;
  /** Per tenant: directories of writes whose outcome is unknown (no reply, or -32010): on disk or not. */
  uncertain: Map<string, Set<string>>;
  /** Per tenant: values of the commands acknowledged (each must be in the ledger once). */
  echoed: Map<string, Set<string>>;
  /** performance.now() of every successful reply, in order. */
  okTimes: number[];
  /** The same per tenant: a dead executor's tenants stall while the others go on. */
  okTimesOf: Map<string, number[]>;
  /** Calls started after the faults were recovered from (the final round's included). */
  afterRecovery: { ok: number; failed: number; examples: string[] };
  notMade: number;
  startedAt: number;
  wallMs: number;
}

/** One POST; resolves with the status and body, or with the transport failure (no reply). */
export async function post(
  client: Client,
  token: string,
  call: PlannedCall,
  timeoutMs: number,
): Promise<{ status: number; body: string } | { failure: string }> {
  try {
    const res = await client.request({
      method: 'POST',
      path: '/',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: call.id, method: 'tools/call', params: { name: call.tool, arguments: call.args } }),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    return { status: res.statusCode, body: await res.body.text() };
  } catch (err) {
    const e = err as Error & { code?: string };
    return { failure: `${e.code ?? e.name}: ${e.message}` };
  }
}

async function answer(client: Client, token: string, call: PlannedCall, timeoutMs: number): Promise<Verdict & { replied: boolean }> {
  const got = await post(client, token, call, timeoutMs);
  if ('failure' in got) return { outcome: 'lost', detail: got.failure, replied: false };
  return { ...judge(call, got.status, got.body), replied: true };
}

/** Makes the first call of every tenant (starting its sandbox), retrying while executors come up. */
export async function warmUp(stack: LoadStack, runId: string): Promise<void> {
  const until = Date.now() + 60_000;
  await Promise.all(
    [...stack.tokens].map(async ([tenant, token]) => {
      const client = new Client(stack.url);
      try {
        for (let attempt = 0; ; attempt++) {
          const verdict = await answer(client, token, echoCall(`warm-${runId}-${tenant}-${attempt}`, `warm-${runId}-${attempt}`), 30_000);
          if (verdict.outcome === 'ok') return;
          if (Date.now() > until) throw new Error(`tenant ${tenant}'s first call kept failing: ${verdict.detail}`);
          await new Promise((r) => setTimeout(r, 200));
        }
      } finally {
        await client.close();
      }
    }),
  );
}

export async function runLoad(stack: LoadStack, args: LoadArgs, runId: string, faults?: FaultDriver): Promise<RunResult> {
  const perTenant = () => new Map([...stack.tokens.keys()].map((t) => [t, new Set<string>()]));
  const result: RunResult = {
    byTool: new Map(LOAD_TOOLS.map((t) => [t, newTally()])),
    examples: { error: [], crossed: [], lost: [] },
    errorsByCode: new Map(),
    acknowledged: perTenant(),
    uncertain: perTenant(),
    echoed: perTenant(),
    okTimes: [],
    okTimesOf: new Map([...stack.tokens.keys()].map((t) => [t, []])),
    afterRecovery: { ok: 0, failed: 0, examples: [] },
    notMade: 0,
    startedAt: performance.now(),
    wallMs: 0,
  };
  const tenants = [...stack.tokens];
  const stopIssuingAt = Date.now() + args.maxSeconds * 1000;
  let claimed = 0;
  // Under faults the run goes on past --calls until the faults are over and calls succeed again.
  const more = () => Date.now() < stopIssuingAt && (claimed < args.calls || (faults !== undefined && (!faults.done || result.afterRecovery.ok < args.clients)));

  const caller = async (k: number) => {
    const [tenant, token] = tenants[k % tenants.length]!;
    const script = new CallerScript(runId, k);
    const client = new Client(stack.url, { pipelining: 1, keepAliveTimeout: 60_000 });
    try {
      while (more()) {
        claimed++;
        // Not inside the optional call's arguments: without faults they would not be evaluated.
        faults?.onClaimed(claimed);
        const call = script.next();
        const t0 = performance.now();
        const verdict = await answer(client, token, call, args.callTimeoutMs);
        script.settled(call, verdict.outcome === 'ok');
        record(result, tenant, call, verdict, t0, faults?.recoveredAt);
        if (verdict.outcome !== 'ok') await new Promise((r) => setTimeout(r, PAUSE_AFTER_ERROR_MS));
      }
    } finally {
      await client.close();
    }
  };
  await Promise.all(Array.from({ length: args.clients }, (_, k) => caller(k)));
  result.wallMs = performance.now() - result.startedAt;
  result.notMade = Math.max(0, args.calls - claimed);
  if (faults) await finalRound(stack, args, runId, result, faults);
  return result;
}

function record(
  result: RunResult,
  tenant: string,
  call: PlannedCall,
  verdict: Verdict & { replied: boolean },
  t0: number,
  recoveredAt: number | undefined,
): void {
  const now = performance.now();
  const tally = result.byTool.get(call.tool)!;
  tally.calls++;
  if (verdict.replied) tally.latencies.push(now - t0);
  tally.outcomes[verdict.outcome]++;
  const ok = verdict.outcome === 'ok';
  if (ok) result.okTimes.push(now);
  if (ok) result.okTimesOf.get(tenant)!.push(now);
  if (ok && call.tool === 'write_file') result.acknowledged.get(tenant)!.add(path.dirname(String(call.args.path)));
  if (!ok && call.tool === 'write_file' && (verdict.outcome === 'lost' || verdict.code === '-32010'))
    result.uncertain.get(tenant)!.add(path.dirname(String(call.args.path)));
  if (ok && call.ledgerLine !== undefined) result.echoed.get(tenant)!.add(call.ledgerLine);
  if (verdict.outcome === 'error') result.errorsByCode.set(verdict.code!, (result.errorsByCode.get(verdict.code!) ?? 0) + 1);
  if (verdict.outcome !== 'ok') {
    const list = result.examples[verdict.outcome];
    if (list.length < MAX_EXAMPLES) list.push(`${call.tool} ${call.id}: ${verdict.detail ?? ''}`);
  }
  if (recoveredAt !== undefined && t0 > recoveredAt) {
    if (ok) result.afterRecovery.ok++;
    else {
      result.afterRecovery.failed++;
      if (result.afterRecovery.examples.length < MAX_EXAMPLES)
        result.afterRecovery.examples.push(`${call.tool} ${call.id}: ${verdict.outcome} ${verdict.detail ?? ''}`);
    }
  }
}

/** After the load: one command per tenant, which must succeed (the faults are over). */
async function finalRound(stack: LoadStack, args: LoadArgs, runId: string, result: RunResult, faults: FaultDriver): Promise<void> {
  await faults.wait();
  const recoveredAt = faults.recoveredAt;
  if (recoveredAt === undefined) return;
  await Promise.all(
    [...stack.tokens].map(async ([tenant, token], i) => {
      const client = new Client(stack.url);
      try {
        const call = echoCall(`final-${runId}-${i}`, `final-${runId}-${i}`);
        const t0 = performance.now();
        record(result, tenant, call, await answer(client, token, call, args.callTimeoutMs), t0, recoveredAt);
      } finally {
        await client.close();
      }
    }),
  );
}
