/** `npm run load` options: the normal run, and with --faults the run that kills Redis's master and an executor. */
import * as path from 'node:path';
import { REPO_ROOT } from '../lib/product';

export const USAGE = `Usage: npm run load -- [--calls N] [--clients N] [--tenants N] [--executors N] [--sandbox none|bwrap|docker]
                       [--max-seconds S] [--call-timeout-ms MS] [--out DIR] [--no-write]
                       [--faults [--shards N] [--lease-ms MS] [--kill-master-at F] [--kill-executor-at F]]

  --calls N            tool calls in all (default 20000; with --faults at least this many: the run
                       goes on until the faults have passed and calls succeed again)
  --clients N          concurrent callers, one connection each (default 64)
  --tenants N          identities the callers are spread over (default 8)
  --executors N        toolgate executor processes (default 2, one shard each; with --faults 3)
  --sandbox NAME       the executors' sandbox backend (default bwrap: several tenants need an isolating
                       sandbox, since none serves a single identity; with --tenants 1, none tests the
                       bus and gateway alone)
  --max-seconds S      no call starts after this (default 300); calls never made count as failures
  --call-timeout-ms MS a call with no reply by then is lost (default 30000)
  --out DIR            where load-<date>.json (load-faults-<date>.json) goes (default bench/results)
  --no-write           print the summary only

  --faults             Redis under Sentinel (a master, a replica, three redis-sentinel) and executors
                       that lease shards; SIGKILLs the Redis master, then an executor holding a lease,
                       during the load. Reports lost, crossed, doubled (a run_command run twice),
                       errors by code, the promotion and takeover times and the longest stall
  --shards N           with --faults: shards (default 2); executors past the first N stand by
  --lease-ms MS        with --faults: TOOLGATE_SHARD_LEASE_MS (default: toolgate's, 5000)
  --kill-master-at F   with --faults: SIGKILL the Redis master once this fraction of --calls has
                       started (default 0.33)
  --kill-executor-at F with --faults: SIGKILL the executor holding shard 0's lease once this fraction
                       has started and the master's failover is over (default 0.67)`;

export interface FaultArgs {
  shards: number;
  leaseMs: number | undefined;
  killMasterAt: number;
  killExecutorAt: number;
}

export interface LoadArgs {
  calls: number;
  clients: number;
  tenants: number;
  executors: number;
  sandbox: string;
  maxSeconds: number;
  callTimeoutMs: number;
  out: string;
  write: boolean;
  /** Set with --faults. */
  faults: FaultArgs | undefined;
}

export function parseArgs(argv: readonly string[]): LoadArgs {
  const args: Omit<LoadArgs, 'executors' | 'faults'> & { executors: number | undefined } = {
    calls: 20_000,
    clients: 64,
    tenants: 8,
    executors: undefined,
    sandbox: 'bwrap',
    maxSeconds: 300,
    callTimeoutMs: 30_000,
    out: path.join(REPO_ROOT, 'bench/results'),
    write: true,
  };
  const fault: FaultArgs = { shards: 2, leaseMs: undefined, killMasterAt: 0.33, killExecutorAt: 0.67 };
  let faults = false;
  /** Fault options given, refused without --faults. */
  const faultOnly = argv.filter((a) => /^--(shards|lease-ms|kill-master-at|kill-executor-at)(=|$)/.test(a)).map((a) => a.split('=')[0]!);
  const counts = {
    '--calls': 'calls',
    '--clients': 'clients',
    '--tenants': 'tenants',
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
    const whole = () => {
      const v = value();
      if (!/^\d+$/.test(v) || Number(v) <= 0) throw new Error(`${flag} must be a positive whole number, got "${v}"`);
      return Number(v);
    };
    const fraction = () => {
      const v = value();
      if (!/^(0?\.\d+|0)$/.test(v) || Number(v) >= 1) throw new Error(`${flag} must be a fraction from 0 up to (not including) 1, got "${v}"`);
      return Number(v);
    };
    if (flag in counts) args[counts[flag as keyof typeof counts]] = whole();
    else if (flag === '--executors') args.executors = whole();
    else if (flag === '--sandbox') {
      args.sandbox = value();
      if (!['none', 'bwrap', 'docker'].includes(args.sandbox)) throw new Error(`--sandbox must be none, bwrap or docker\n\n${USAGE}`);
    } else if (flag === '--out') args.out = path.resolve(value());
    else if (flag === '--no-write') args.write = false;
    else if (flag === '--faults') faults = true;
    else if (flag === '--shards') fault.shards = whole();
    else if (flag === '--lease-ms') fault.leaseMs = whole();
    else if (flag === '--kill-master-at') fault.killMasterAt = fraction();
    else if (flag === '--kill-executor-at') fault.killExecutorAt = fraction();
    else if (flag === '--help' || flag === '-h') throw new Error(USAGE);
    else throw new Error(`unknown option ${a}\n\n${USAGE}`);
  }
  if (!faults && faultOnly.length) throw new Error(`${faultOnly.join(', ')} only apply with --faults\n\n${USAGE}`);
  const executors = args.executors ?? (faults ? 3 : 2);
  // A takeover needs someone to take over: a standby, or a holder of another shard that is a candidate too.
  if (faults && executors <= fault.shards)
    throw new Error(`--faults needs more executors than shards (a standby to take over), got ${executors} for ${fault.shards}`);
  if (faults && fault.killExecutorAt < fault.killMasterAt) throw new Error('--kill-executor-at must not come before --kill-master-at');
  return { ...args, executors, faults: faults ? fault : undefined };
}
