/**
 * `npm run load`: the proof that no reply is lost or crossed under load. 64 callers (each its
 * own keep-alive connection) through `toolgate serve` on BullMQ with two `toolgate executor`
 * processes, a bounded number of mixed tool calls (default 20,000), every call carrying a
 * unique value its reply must echo (bench/load/workload.ts). Afterwards the workspaces are read
 * back: every acknowledged write must be on disk exactly once.
 *
 * Prints a summary (lost, crossed, errors, p50/p99, calls/s, peak RSS), writes
 * bench/results/load-<date>.json and exits 1 unless lost, crossed and errors are all 0 and
 * every call was made. Loopback only; bounded in time: callers stop starting calls after
 * --max-seconds and every call has its own deadline, so the run always ends.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { Client } from 'undici';
import { REPO_ROOT } from './lib/product';
import { RssSampler } from './lib/rss';
import { percentile } from './lib/stats';
import { ms } from './lib/table';
import { LoadStack, startLoadStack } from './load/stack';
import { CallerScript, echoCall, judge, LOAD_TOOLS, LoadTool, Outcome, PlannedCall } from './load/workload';

const USAGE = `Usage: npm run load -- [--calls N] [--clients N] [--tenants N] [--executors N] [--sandbox none|bwrap|docker]
                       [--max-seconds S] [--call-timeout-ms MS] [--out DIR] [--no-write]

  --calls N            tool calls in all (default 20000)
  --clients N          concurrent callers, one connection each (default 64)
  --tenants N          identities the callers are spread over (default 8)
  --executors N        toolgate executor processes, one shard each (default 2)
  --sandbox NAME       the executors' sandbox backend (default bwrap: several tenants need an isolating
                       sandbox, since none serves a single identity; with --tenants 1, none tests the
                       bus and gateway alone)
  --max-seconds S      no call starts after this (default 300); calls never made count as failures
  --call-timeout-ms MS a call with no reply by then is lost (default 30000)
  --out DIR            where load-<date>.json goes (default bench/results)
  --no-write           print the summary only`;

interface LoadArgs {
  calls: number;
  clients: number;
  tenants: number;
  executors: number;
  sandbox: string;
  maxSeconds: number;
  callTimeoutMs: number;
  out: string;
  write: boolean;
}

function parseArgs(argv: readonly string[]): LoadArgs {
  const args: LoadArgs = {
    calls: 20_000,
    clients: 64,
    tenants: 8,
    executors: 2,
    sandbox: 'bwrap',
    maxSeconds: 300,
    callTimeoutMs: 30_000,
    out: path.join(REPO_ROOT, 'bench/results'),
    write: true,
  };
  const counts = {
    '--calls': 'calls',
    '--clients': 'clients',
    '--tenants': 'tenants',
    '--executors': 'executors',
    '--max-seconds': 'maxSeconds',
    '--call-timeout-ms': 'callTimeoutMs',
  } as const;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const [flag, inline] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined || v.startsWith('--')) throw new Error(`${flag} needs a value\n\n${USAGE}`);
      return v;
    };
    if (flag in counts) {
      const v = value();
      if (!/^\d+$/.test(v) || Number(v) <= 0) throw new Error(`${flag} must be a positive whole number, got "${v}"`);
      args[counts[flag as keyof typeof counts]] = Number(v);
    } else if (flag === '--sandbox') {
      args.sandbox = value();
      if (!['none', 'bwrap', 'docker'].includes(args.sandbox)) throw new Error(`--sandbox must be none, bwrap or docker\n\n${USAGE}`);
    } else if (flag === '--out') args.out = path.resolve(value());
    else if (flag === '--no-write') args.write = false;
    else if (flag === '--help' || flag === '-h') throw new Error(USAGE);
    else throw new Error(`unknown option ${a}\n\n${USAGE}`);
  }
  return args;
}

interface Tally {
  calls: number;
  outcomes: Record<Outcome, number>;
  /** Latency of every call that got a reply, ms. */
  latencies: number[];
}

const newTally = (): Tally => ({ calls: 0, outcomes: { ok: 0, error: 0, crossed: 0, lost: 0 }, latencies: [] });
const MAX_EXAMPLES = 5;

interface RunResult {
  byTool: Map<LoadTool, Tally>;
  examples: Record<Exclude<Outcome, 'ok'>, string[]>;
  /** Per tenant: directories of writes that were acknowledged. */
  acknowledged: Map<string, Set<string>>;
  notMade: number;
  wallMs: number;
}

/** One POST; resolves with the status and body, or with the transport failure (no reply). */
async function post(client: Client, token: string, call: PlannedCall, timeoutMs: number): Promise<{ status: number; body: string } | { failure: string }> {
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

/** Makes the first call of every tenant (starting its sandbox), retrying while executors come up. */
async function warmUp(stack: LoadStack, runId: string): Promise<void> {
  const until = Date.now() + 60_000;
  await Promise.all(
    [...stack.tokens].map(async ([tenant, token]) => {
      const client = new Client(stack.url);
      try {
        for (let attempt = 0; ; attempt++) {
          const call = echoCall(`warm-${runId}-${tenant}-${attempt}`, `warm-${runId}-${attempt}`);
          const answer = await post(client, token, call, 30_000);
          const verdict = 'failure' in answer ? { outcome: 'lost', detail: answer.failure } : judge(call, answer.status, answer.body);
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

async function runLoad(stack: LoadStack, args: LoadArgs, runId: string): Promise<RunResult> {
  const byTool = new Map(LOAD_TOOLS.map((t) => [t, newTally()]));
  const examples: RunResult['examples'] = { error: [], crossed: [], lost: [] };
  const acknowledged = new Map([...stack.tokens.keys()].map((t) => [t, new Set<string>()]));
  const tenants = [...stack.tokens];
  const stopIssuingAt = Date.now() + args.maxSeconds * 1000;
  let claimed = 0;
  const started = performance.now();

  const caller = async (k: number) => {
    const [tenant, token] = tenants[k % tenants.length]!;
    const script = new CallerScript(runId, k);
    const client = new Client(stack.url, { pipelining: 1, keepAliveTimeout: 60_000 });
    try {
      while (claimed < args.calls && Date.now() < stopIssuingAt) {
        claimed++;
        const call = script.next();
        const t0 = performance.now();
        const answer = await post(client, token, call, args.callTimeoutMs);
        const tally = byTool.get(call.tool)!;
        tally.calls++;
        let verdict: { outcome: Outcome; detail?: string };
        if ('failure' in answer) verdict = { outcome: 'lost', detail: answer.failure };
        else {
          tally.latencies.push(performance.now() - t0);
          verdict = judge(call, answer.status, answer.body);
        }
        tally.outcomes[verdict.outcome]++;
        if (verdict.outcome === 'ok' && call.tool === 'write_file') acknowledged.get(tenant)!.add(path.dirname(String(call.args.path)));
        if (verdict.outcome !== 'ok') {
          const list = examples[verdict.outcome];
          if (list.length < MAX_EXAMPLES) list.push(`${call.tool} ${call.id}: ${verdict.detail ?? ''}`);
        }
      }
    } finally {
      await client.close();
    }
  };
  await Promise.all(Array.from({ length: args.clients }, (_, k) => caller(k)));
  return { byTool, examples, acknowledged, notMade: Math.max(0, args.calls - claimed), wallMs: performance.now() - started };
}

/** Every acknowledged write's directory is on disk with its value, and nothing else is. */
async function checkDisk(stack: LoadStack, acknowledged: Map<string, Set<string>>): Promise<{ expected: number; found: number; problems: string[] }> {
  let expected = 0;
  let found = 0;
  const problems: string[] = [];
  for (const [tenant, dirs] of acknowledged) {
    expected += dirs.size;
    const root = path.join(stack.workspaceOf(tenant), 'load');
    const onDisk = new Set<string>();
    for (const c of await fs.readdir(root).catch(() => [] as string[])) {
      for (const v of await fs.readdir(path.join(root, c))) onDisk.add(`load/${c}/${v}`);
    }
    found += onDisk.size;
    for (const dir of dirs) {
      const content = await fs.readFile(path.join(stack.workspaceOf(tenant), dir, 'value.txt'), 'utf8').catch(() => undefined);
      if (content !== path.basename(dir) && problems.length < MAX_EXAMPLES) problems.push(`${tenant}: ${dir}/value.txt holds ${JSON.stringify(content)}`);
    }
    for (const dir of onDisk) if (!dirs.has(dir) && problems.length < MAX_EXAMPLES) problems.push(`${tenant}: ${dir} was written but never acknowledged`);
  }
  return { expected, found, problems };
}

function pad(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '));
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const runId = randomBytes(3).toString('hex');
  const startedAt = new Date();
  process.stderr.write(`load: starting redis-server, toolgate serve and ${args.executors} toolgate executor(s) (sandbox ${args.sandbox}) on 127.0.0.1\n`);
  const stack = await startLoadStack({ executors: args.executors, tenants: args.tenants, sandbox: args.sandbox });
  // A run that cannot end by itself (it should always) is stopped: bounded in time whatever happens.
  const hardStop = setTimeout(
    () => {
      process.stderr.write('load: the run overran its time bound; stopping\n');
      void stack.close().finally(() => process.exit(2));
    },
    (args.maxSeconds + 120) * 1000 + args.callTimeoutMs,
  );
  hardStop.unref();
  let result: RunResult;
  let disk: Awaited<ReturnType<typeof checkDisk>>;
  const sampler = new RssSampler(
    new Map([
      ['gateway', () => [stack.gateway.pid]],
      ['executors', () => stack.executors.map((e) => e.pid)],
    ]),
    250,
  );
  try {
    await warmUp(stack, runId);
    process.stderr.write(`load: ${args.calls} calls from ${args.clients} callers over ${args.tenants} tenants…\n`);
    sampler.start();
    result = await runLoad(stack, args, runId);
    sampler.stop();
    disk = await checkDisk(stack, result.acknowledged);
  } catch (err) {
    const logs = [stack.gateway, ...stack.executors].map((s) => `--- ${s.name}\n${s.stderr().trim()}`).join('\n');
    await stack.close();
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n${logs}`);
  }
  await stack.close();
  clearTimeout(hardStop);

  const all = newTally();
  for (const t of result.byTool.values()) {
    all.calls += t.calls;
    for (const k of Object.keys(all.outcomes) as Outcome[]) all.outcomes[k] += t.outcomes[k];
    all.latencies.push(...t.latencies);
  }
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
  const callsPerSec = (all.calls * 1000) / result.wallMs;
  const passed =
    all.outcomes.lost === 0 &&
    all.outcomes.crossed === 0 &&
    all.outcomes.error === 0 &&
    result.notMade === 0 &&
    disk.found === disk.expected &&
    disk.problems.length === 0;

  const lines = [
    `toolgate load · ${args.calls} calls · ${args.clients} callers · ${args.tenants} tenants · gateway on BullMQ · ${args.executors} executors (one shard each) · sandbox ${args.sandbox}`,
    ...pad([
      ['tool', 'calls', 'ok', 'lost', 'crossed', 'errors', 'p50 ms', 'p99 ms'],
      ...LOAD_TOOLS.map((t) => row(t, result.byTool.get(t)!)),
      row('all', all),
    ]).map((l) => `  ${l}`),
    `  ${Math.round(callsPerSec)} calls/s over ${(result.wallMs / 1000).toFixed(1)} s; peak RSS gateway ${sampler.peak('gateway')?.toFixed(1) ?? '–'} MiB, executors with sandboxes ${sampler.peak('executors')?.toFixed(1) ?? '–'} MiB`,
    `  on disk: ${disk.found} write directories for ${disk.expected} acknowledged writes${disk.problems.length ? ` — ${disk.problems.length} problem(s)` : ''}`,
    ...(result.notMade ? [`  ${result.notMade} calls were never made: --max-seconds ${args.maxSeconds} passed first`] : []),
    ...(['lost', 'crossed', 'error'] as const).flatMap((k) => result.examples[k].map((e) => `  ${k}: ${e}`)),
    ...disk.problems.map((p) => `  disk: ${p}`),
    `  → ${passed ? 'PASS' : 'FAIL'}: lost ${all.outcomes.lost}, crossed ${all.outcomes.crossed}, errors ${all.outcomes.error}`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);

  if (args.write) {
    await fs.mkdir(args.out, { recursive: true });
    const file = path.join(args.out, `load-${startedAt.toISOString().slice(0, 10)}.json`);
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
    const report = {
      info: { startedAt: startedAt.toISOString(), finishedAt: new Date().toISOString(), node: process.version, args: { ...args, out: undefined } },
      passed,
      lost: all.outcomes.lost,
      crossed: all.outcomes.crossed,
      errors: all.outcomes.error,
      notMade: result.notMade,
      callsPerSec,
      wallMs: result.wallMs,
      peakRssMiB: { gateway: sampler.peak('gateway') ?? null, executors: sampler.peak('executors') ?? null },
      disk,
      tools,
      examples: result.examples,
    };
    await fs.writeFile(file, `${JSON.stringify(report, null, 1)}\n`);
    process.stdout.write(`  wrote ${path.relative(process.cwd(), file) || file}\n`);
  }
  return passed ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`load: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  },
);
