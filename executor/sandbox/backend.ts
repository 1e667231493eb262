/**
 * A sandbox backend starts one isolated sandbox agent per workspace. Implementations: `none`
 * (a plain child process, path-jailed: single local user only), `bwrap` (bubblewrap: no network,
 * private /tmp, read-only minimal system view, unprivileged uid, process limit), and `docker`
 * (a hardened container). All pass the one contract suite in test/contracts/.
 */
import type { ToolLimits } from '../../shared/limits';
import type { CallSignal } from '../../shared/tools/runner';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import type { ToolResult } from '../../shared/tools/tool';

export interface SandboxSpec {
  /** Host path of the workspace; the only writable place the sandbox sees. */
  workspace: string;
  /** Tool limits the agent enforces. */
  limits: ToolLimits;
  /** Whose sandbox this is, for labels and logs. */
  tenant: string;
  /**
   * The uid the sandbox's agent, commands and written files have: the workspace's owner (`stdio`
   * passes the root's owner, so a local user's files stay theirs; executors pass a uid per tenant
   * on bwrap, where RLIMIT_NPROC counts per uid). Never 0. Unset: the backend's own default.
   */
  uid?: number;
  /** The gid to go with `uid` (default: the same number as the uid). */
  gid?: number;
}

export interface Sandbox {
  /**
   * Runs a sandbox tool on `args` that the caller has already parsed against the tool's input
   * schema (defaults applied, unknown keys refused): the executor's job handler and the MCP
   * server of `stdio` do, and anyone else calls `callParsing` (sandbox-tools.ts). A sandbox runs
   * them as they are: its agent never loads the schemas (executor/agent/protocol.ts). Rejects
   * with a ProtocolError: InvalidParams for a tool that is not a sandbox tool, OutcomeUnknown if
   * the agent dies mid-call (see `ranMaybe`), Unavailable if it was gone before the call reached
   * it, Cancelled on abort. `signal` may be made on first read (CallSignal): a call nobody
   * cancels never makes one. `onProgress` receives the tool's newest line while it runs.
   */
  call(tool: string, args: unknown, signal: CallSignal, onProgress?: (message: string) => void): Promise<ToolResult>;
  /** False once the agent has exited. */
  readonly alive: boolean;
  /** Resolves when the agent has exited, with the reason. */
  readonly exited: Promise<string>;
  /**
   * Resolves once the start_process process `handle` has ended (the agent reports it: exited, or
   * killed, and its output closed) or the sandbox has: what counts a live process waits for this.
   */
  processEnded(handle: string): Promise<void>;
  /** Stops the agent and every process it started. */
  stop(): Promise<void>;
}

export interface SandboxBackend {
  readonly name: string;
  /** True when this backend keeps tenants apart by more than path checks. */
  readonly isolating: boolean;
  /** Starts a sandbox and resolves once its agent answers; rejects with the reason it could not start. */
  start(spec: SandboxSpec): Promise<Sandbox>;
  /**
   * Optional: starts what the backend keeps ready for new sandboxes with these limits (docker's
   * warm pool) and resolves once it is ready. Never rejects: failures go to the backend's log hook.
   */
  warm?(limits: ToolLimits): Promise<void>;
  /** Optional: stops what the backend holds besides the sandboxes it handed out. */
  close?(): Promise<void>;
}

/**
 * A sandbox failure (Unavailable) as told to a call that was running in the sandbox when it
 * happened: OutcomeUnknown, since its tool may have run in whole or in part.
 */
export function ranMaybe(err: Error): Error {
  if (!(err instanceof ProtocolError) || err.code !== ErrorCode.Unavailable) return err;
  const why = err.message.replace(/^Sandbox (unavailable|ended): /, '');
  return new ProtocolError(ErrorCode.OutcomeUnknown, `Outcome unknown: the sandbox ended while the call ran in it (${why}); the call may have run in part`);
}
