/**
 * The node flags `toolgate serve` is started with: the package's `toolgate` bin (bin/toolgate, a
 * launcher that starts node with them for serve only: a global install, npx), the service image's
 * CMD, the gateway in docker-compose.yml and `npm start` spell them out, and
 * test/bin/launch.test.ts checks that they agree with this list (the bench starts serve with it
 * too). V8's defaults give the young generation 2 × 16 MiB and let the old one grow by up to 4×
 * before a major GC; under 64 busy callers that put the gateway at 125–170 MiB RSS. With these,
 * 2 × 4 MiB and a major GC once the old generation is 20 % (at least 8 MiB) past what the last
 * one left: under 100 MiB, for more gateway CPU per call on the Redis path
 * (bench/results/2026-11-24-gateway-memory.md).
 *
 * Only serve: `executor` and `stdio` have CPU targets and no memory one (with these flags stdio
 * started 22–31 % slower and the executor spent +5–13 % CPU per call:
 * bench/results/2026-11-26-serve-bin-memory.md). Started by node without them
 * (`node dist/bin/toolgate.js serve`), serve applies them itself: `applyServeNodeFlags`.
 */
import { setFlagsFromString } from 'node:v8';

export const SERVE_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4', '--heap-growing-percent=20'];

/** Node ≥ 22.15 and 24 replace the running program in place (same pid); Node 20 cannot. */
type Execve = (file: string, args: readonly string[], env: NodeJS.ProcessEnv) => never;

/** The flags of SERVE_NODE_FLAGS this node was not started with (a flag given with another value counts as given). */
export function missingServeFlags(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): string[] {
  const given = [...execArgv, ...nodeOptions.split(/\s+/)].map((a) => a.split('=')[0]!.replace(/_/g, '-'));
  return SERVE_NODE_FLAGS.filter((flag) => !given.includes(flag.split('=')[0]!));
}

/**
 * Gives serve its flags when node was started without them (`node dist/bin/toolgate.js serve`,
 * a wrapper of one's own; the package's bin gives them). Where Node can (process.execve), it restarts
 * itself with them before anything has started: the same pid, so a supervisor's signals and the
 * exit code are as before and no second process stays resident (the memory target counts the
 * whole process tree). Elsewhere (Node 20) it sets what V8 still takes at run time, the old
 * generation's growth; the young generation's size is fixed when node starts (measured: a
 * run-time --max-semi-space-size changes nothing), so there the launch flags still matter.
 * Returns only when it did not restart.
 */
export function applyServeNodeFlags(script: string, args: readonly string[]): void {
  const missing = missingServeFlags();
  if (missing.length === 0) return;
  const execve = (process as unknown as { execve?: Execve }).execve;
  if (typeof execve === 'function') {
    execve.call(process, process.execPath, [process.execPath, ...process.execArgv, ...missing, script, ...args], process.env);
  }
  for (const flag of missing) if (flag.startsWith('--heap-growing-percent=')) setFlagsFromString(flag);
}
