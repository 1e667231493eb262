/**
 * `none`: the agent as a plain child process confined only by the workspace path checks. No
 * isolation between the agent and the host user: for a single local user only (the default of
 * `toolgate stdio`, for speed), announced at start-up.
 */
import type { SandboxBackend, SandboxSpec } from './backend';
import { AGENT_MAIN, AgentProcess } from './agent-process';

/**
 * V8 flags for every sandbox agent (none, bwrap, docker). A 1 MiB semi-space (young generation
 * half; V8's default grows to 16 MiB) trims ~10 MiB of anonymous memory from an idle agent, and a
 * smaller agent also forks faster for `run_command` (fork copies the page tables). The agent's
 * allocations are small and short-lived, so more frequent scavenges cost it little.
 */
export const AGENT_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=1'];

export interface NoneBackendOptions {
  startTimeoutMs?: number;
  onStderr?: (line: string) => void;
  /** See AgentConnectionOptions.argumentsParsed. */
  argumentsParsed?: boolean;
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
        { startTimeoutMs: options.startTimeoutMs ?? 10_000, onStderr: options.onStderr, argumentsParsed: options.argumentsParsed },
      ),
  };
}
