/**
 * `none`, in this process: the sandbox tools run in the executor's own process against the
 * tenant's workspace, with the same code and checks the sandbox agent runs — the workspace wall
 * (path checks, pinned directories), the tool limits, argument validation (unknown keys refused
 * by name), host paths made relative, progress coalesced to the newest line every 100 ms, and
 * commands spawned with the fixed minimal environment and their own process group.
 *
 * Why: `none` isolates nothing beyond those path checks (the agent is a child of the same user,
 * with the same rights), so a separate agent process adds only a process hop per call: two more
 * pipe writes and one more process to wake. `toolgate serve` without Redis (the embedded
 * executor) and `toolgate stdio` use this; isolating backends keep their agent process, which is
 * their wall. What is given up: a tool that crashes the process takes the server with it (a bug
 * in our code, not something a caller controls: tool failures are results), and `none` serves
 * one identity (single-identity.ts) since there is no wall between tenants either way.
 */
import type { ToolLimits } from '../../shared/limits';
import { latestWins } from '../../shared/latest-wins';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import { parseToolArguments } from '../../shared/tools/arguments';
import { clean } from '../../shared/tools/commands/last-line';
import { ProcessTable } from '../../shared/tools/commands/process-table';
import { LocalToolRunner } from '../../shared/tools/local-runner';
import { errorResult } from '../../shared/tools/result';
import { unknownToolMessage } from '../../shared/tools/suggest';
import type { ToolResult } from '../../shared/tools/tool';
import { Workspace } from '../../shared/workspace/workspace';
import { ranMaybe, type Sandbox, type SandboxBackend, type SandboxSpec } from './backend';
import { ArgsTranslator, hostPathTranslator } from './host-paths';
import { ProcessEnds } from './process-ends';
import { SANDBOX_TOOLS } from './sandbox-tools';

/** The agent's progress pace (executor/agent/main.ts: relay, minGapMs 100). */
const PROGRESS_GAP_MS = 100;

export interface InProcessBackendOptions {
  /** Called with unexpected errors (bugs) in a tool; the caller sees a generic failure. */
  onUnexpectedError?: (err: unknown, tool: string) => void;
  /**
   * Every call's arguments were already parsed against the tool's schema in this process (the
   * executor's job handler does, defaults applied), so they are not parsed again (as an agent
   * backend's `argumentsParsed`). Default false.
   */
  argumentsParsed?: boolean;
}

export function inProcessBackend(options: InProcessBackendOptions = {}): SandboxBackend {
  return {
    name: 'none',
    isolating: false,
    start: (spec: SandboxSpec) => InProcessSandbox.start(spec, options),
  };
}

class InProcessSandbox implements Sandbox {
  readonly exited: Promise<string>;
  private isAlive = true;
  private endWith!: (reason: string) => void;
  /** The calls running now: a stop fails them and aborts their tools, as an agent's exit would. */
  private readonly running = new Set<(err: Error) => void>();
  private readonly runner: LocalToolRunner;
  private readonly translate: ArgsTranslator;
  private readonly argumentsParsed: boolean;
  private readonly processEnds = new ProcessEnds();

  private constructor(workspace: Workspace, limits: ToolLimits, hostRoot: string, options: InProcessBackendOptions) {
    this.argumentsParsed = options.argumentsParsed ?? false;
    this.exited = new Promise((resolve) => (this.endWith = resolve));
    this.translate = hostPathTranslator(hostRoot);
    this.runner = new LocalToolRunner({
      sandbox: { workspace, limits, processes: new ProcessTable(limits, (handle) => this.processEnds.ended(handle)) },
      onUnexpectedError: options.onUnexpectedError,
    });
  }

  static async start(spec: SandboxSpec, options: InProcessBackendOptions): Promise<InProcessSandbox> {
    let workspace: Workspace;
    try {
      workspace = await Workspace.open(spec.workspace, spec.limits.maxPathLength);
    } catch (err) {
      throw new Error(`sandbox failed to start: ${err instanceof Error ? err.message : String(err)}`);
    }
    return new InProcessSandbox(workspace, spec.limits, spec.workspace, options);
  }

  get alive(): boolean {
    return this.isAlive;
  }

  call(name: string, args: unknown, signal: AbortSignal, onProgress?: (message: string) => void): Promise<ToolResult> {
    if (!this.isAlive) return Promise.reject(new ProtocolError(ErrorCode.Unavailable, 'Sandbox unavailable: the sandbox was stopped'));
    if (signal.aborted) return Promise.reject(abortReason(signal));
    const tool = SANDBOX_TOOLS.get(name);
    if (!tool) return Promise.reject(new ProtocolError(ErrorCode.InvalidParams, unknownToolMessage(name, SANDBOX_TOOLS.keys())));
    const translated = this.translate(args); // strings stay strings: parsed arguments stay valid
    let data = translated;
    if (!this.argumentsParsed) {
      const parsed = parseToolArguments(tool, translated);
      if (!parsed.ok) return Promise.resolve(errorResult(parsed.message));
      data = parsed.data;
    }
    const progress = onProgress ? latestWins((line: string) => onProgress(clean(line)), PROGRESS_GAP_MS) : undefined;
    // The tool's own signal: the caller's abort, or this sandbox stopping (which ends its command,
    // as an agent's exit would).
    const controller = new AbortController();
    return new Promise<ToolResult>((resolve, reject) => {
      // The caller's abort answers at once (as the agent's client does).
      const onAbort = () => finish(() => reject(abortReason(signal)), signal.reason);
      const onStop = (err: Error) => finish(() => reject(err), err);
      const finish = (settle: () => void, abortWith?: unknown) => {
        if (!this.running.delete(onStop)) return;
        signal.removeEventListener('abort', onAbort);
        progress?.stop();
        if (abortWith !== undefined) controller.abort(abortWith);
        settle();
      };
      this.running.add(onStop);
      signal.addEventListener('abort', onAbort, { once: true });
      this.runner.run(tool, data, undefined, controller.signal, progress ? { onProgress: (line) => progress.push(line) } : undefined).then(
        (result) => finish(() => resolve(result)),
        (err: unknown) => finish(() => reject(err instanceof Error ? err : new Error(String(err)))),
      );
    });
  }

  processEnded(handle: string): Promise<void> {
    return this.isAlive ? this.processEnds.wait(handle) : Promise.resolve();
  }

  async stop(): Promise<void> {
    if (!this.isAlive) return;
    this.isAlive = false;
    const err = ranMaybe(new ProtocolError(ErrorCode.Unavailable, 'Sandbox unavailable: the sandbox was stopped'));
    for (const fail of [...this.running]) fail(err);
    await this.runner.close(); // ends every process it started
    // Its processes ended with it (as with an agent's exit).
    this.processEnds.endAll();
    this.endWith('was stopped');
  }
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
}
