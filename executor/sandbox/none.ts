/**
 * `none`: no wall, only the workspace path checks — the tools run as the host user, either in
 * this process (sandbox/in-process.ts, when embedded) or in an agent child per tenant. For a
 * single local user only (the default of `toolgate stdio`, for speed), announced at start-up.
 */
import type { Logger } from '../../shared/log';
import type { SandboxBackend, SandboxSpec } from './backend';
import { AGENT_MAIN, AgentProcess } from './agent-process';
import type { SandboxBackendModule } from './module';

/**
 * Node and V8 flags for every sandbox agent (none, bwrap, docker); each one measured on the idle
 * agent's RSS (bench/results/2026-11-24-memory.md, 2026-11-24-sandbox-2.md) and on its latency:
 * - `--max-semi-space-size=1`: a 1 MiB semi-space (young generation half; V8's default grows to
 *   16 MiB) trims ~10 MiB of anonymous memory, and a smaller agent forks faster for `run_command`
 *   (fork copies the page tables). The agent's allocations are small and short-lived, so more
 *   frequent scavenges cost it little.
 * - `--no-short-builtin-calls`: V8 otherwise copies its embedded builtins next to its code space
 *   for shorter calls, and the pages the agent runs are then resident twice (~1 MiB of the node
 *   binary); the builtins run from the binary's own mapping instead.
 * - `--v8-pool-size=1`: one V8 worker thread instead of four (concurrent compilation and GC
 *   helpers); each idle worker costs its stack and malloc arena (~0.6 MiB together). The agent
 *   serves one executor, on machines where the cores are the tenants' anyway.
 * - `--expose-gc --compact-on-every-full-gc`: the one compacting collection the agent runs when it
 *   has started (executor/agent/start-gc.ts).
 */
export const AGENT_NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=1',
  '--no-short-builtin-calls',
  '--v8-pool-size=1',
  '--expose-gc',
  '--compact-on-every-full-gc',
];

export interface NoneBackendOptions {
  startTimeoutMs?: number;
  onStderr?: (line: string) => void;
}

export function noneBackend(options: NoneBackendOptions = {}): SandboxBackend {
  return {
    name: 'none',
    isolating: false,
    start: (spec: SandboxSpec) =>
      AgentProcess.start(
        {
          file: process.execPath,
          args: [...AGENT_NODE_FLAGS, AGENT_MAIN, '--root', spec.workspace, '--limits', JSON.stringify(spec.limits)],
          env: { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8' },
        },
        spec,
        { startTimeoutMs: options.startTimeoutMs ?? 10_000, onStderr: options.onStderr },
      ),
  };
}

/**
 * `none` has no section: the tools run as this user, in the workspace as it is — in the
 * creator's own process when it is embedded (stdio, serve without Redis), else in an agent child
 * per tenant (a standalone executor: a tool's crash then ends only that child).
 */
export const noneModule = {
  id: 'none',
  section: () => ({}),
  create: (_section, deps) => (deps.embedded ? inProcessNone(deps.log) : noneBackend({ onStderr: deps.onStderr })),
} satisfies SandboxBackendModule<object>;

/** The in-process `none`, loaded only when chosen (an agent-per-tenant executor never runs the tools itself). */
function inProcessNone(log: Logger): SandboxBackend {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load, on purpose (above)
  const { inProcessBackend } = require('./in-process') as typeof import('./in-process');
  return inProcessBackend({ onUnexpectedError: (err, tool) => log.error({ err, tool }, 'tool failed unexpectedly') });
}
