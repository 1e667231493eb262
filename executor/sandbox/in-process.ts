/**
 * `none`, in this process: the sandbox tools run in the executor's own process against the
 * tenant's workspace, with the same code and checks the sandbox agent runs — the workspace wall
 * (path checks, pinned directories), the tool limits, host paths made relative, progress
 * coalesced to the newest line every 100 ms, and commands spawned with the fixed minimal
 * environment and their own process group. Like the agent, it runs the arguments its caller
 * parsed (the Sandbox contract, backend.ts).
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
import { LatestWins, latestWins } from '../../shared/latest-wins';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import { clean } from '../../shared/tools/commands/last-line';
import { ProcessTable } from '../../shared/tools/commands/process-table';
import { LocalToolRunner } from '../../shared/tools/local-runner';
import { CallExtras, CallSignal, signalOf } from '../../shared/tools/runner';
import { unknownToolMessage } from '../../shared/tools/suggest';
import type { ToolResult } from '../../shared/tools/tool';
import { Workspace } from '../../shared/workspace/workspace';
import { PROGRESS_GAP_MS } from '../agent/protocol';
import { ranMaybe, type Sandbox, type SandboxBackend, type SandboxSpec } from './backend';
import { ArgsTranslator, hostPathTranslator } from './host-paths';
import { ProcessEnds } from './process-ends';
import { SANDBOX_TOOLS } from './sandbox-tools';

export interface InProcessBackendOptions {
  /** Called with unexpected errors (bugs) in a tool; the caller sees a generic failure. */
  onUnexpectedError?: (err: unknown, tool: string) => void;
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
  private readonly running = new Set<InProcessCall>();
  private readonly runner: LocalToolRunner;
  private readonly translate: ArgsTranslator;
  private readonly processEnds = new ProcessEnds();

  private constructor(workspace: Workspace, limits: ToolLimits, hostRoot: string, options: InProcessBackendOptions) {
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

  call(name: string, args: unknown, signal: CallSignal, onProgress?: (message: string) => void): Promise<ToolResult> {
    if (!this.isAlive) return Promise.reject(stopped());
    if (signal instanceof AbortSignal && signal.aborted) return Promise.reject(abortReason(signal));
    const tool = SANDBOX_TOOLS.get(name);
    if (!tool) return Promise.reject(new ProtocolError(ErrorCode.InvalidParams, unknownToolMessage(name, SANDBOX_TOOLS.keys())));
    const data = this.translate(args); // strings stay strings: parsed arguments stay valid
    if (!(signal instanceof AbortSignal)) {
      // A signal made on first read (stdio's MCP server): nothing can answer before the tool does,
      // so the tool's own promise is handed on, with one step that says Unavailable after a stop.
      const call = new InProcessCall(signal, undefined, this.running, onProgress);
      return this.runner.run(tool, data, undefined, call, call.extras).then(
        (result) => call.resolved(result),
        (err: unknown) => call.rejected(err),
      );
    }
    return new Promise<ToolResult>((resolve, reject) => {
      const call = new InProcessCall(signal, { resolve, reject }, this.running, onProgress);
      this.runner.run(tool, data, undefined, call, call.extras).then(
        (result) => call.end(result),
        (err: unknown) => call.fail(err instanceof Error ? err : new Error(String(err))),
      );
    });
  }

  processEnded(handle: string): Promise<void> {
    return this.isAlive ? this.processEnds.wait(handle) : Promise.resolve();
  }

  async stop(): Promise<void> {
    if (!this.isAlive) return;
    this.isAlive = false;
    const err = ranMaybe(stopped());
    for (const call of [...this.running]) call.fail(err, err);
    await this.runner.close(); // ends every process it started
    // Its processes ended with it (as with an agent's exit).
    this.processEnds.endAll();
    this.endWith('was stopped');
  }
}

/**
 * One running call: it settles the caller's promise once, and it is the tool's CallSignal, made
 * on the tool's first read (most tools never read it: stdio's read_file makes no AbortSignal) and
 * aborted by the caller's abort or the sandbox's stop. A caller's abort answers at once (as the
 * agent's client does) when the caller's AbortSignal exists; a caller whose signal is made on
 * first read (the MCP server's request context) is watched from when the tool reads its own, and
 * its call settles when the tool does (its tool ended by the abort or stop: Cancelled, Unavailable).
 */
class InProcessCall {
  readonly extras: CallExtras | undefined;
  private controller: AbortController | undefined;
  private abortedWith: { reason: unknown } | undefined;
  private failedWith: Error | undefined;
  private watched: AbortSignal | undefined;
  private onAbort: (() => void) | undefined;
  private readonly progress: LatestWins<string> | undefined;

  constructor(
    private readonly caller: CallSignal,
    /** The caller's promise, when it may settle before the tool does (see `call`). */
    private readonly settle: { resolve(result: ToolResult): void; reject(err: Error): void } | undefined,
    private readonly running: Set<InProcessCall>,
    onProgress: ((message: string) => void) | undefined,
  ) {
    running.add(this);
    if (onProgress) {
      const progress = latestWins((line: string) => onProgress(clean(line)), PROGRESS_GAP_MS);
      this.progress = progress;
      this.extras = { onProgress: (line) => progress.push(line) };
    }
    if (caller instanceof AbortSignal) this.watch(caller);
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
      else if (!this.watched && this.running.has(this)) this.watch(signalOf(this.caller));
    }
    return this.controller.signal;
  }

  end(result: ToolResult): void {
    if (this.finish()) this.settle?.resolve(result);
  }

  /** Fails the call; with `abortWith`, its tool is aborted too. */
  fail(err: Error, abortWith?: unknown): void {
    if (!this.finish()) return;
    this.failedWith = err;
    if (abortWith !== undefined) {
      this.abortedWith = { reason: abortWith };
      this.controller?.abort(abortWith);
    }
    this.settle?.reject(err);
  }

  /** For a call without `settle`: the tool's result, unless a stop or an abort failed the call first. */
  resolved(result: ToolResult): ToolResult {
    this.finish();
    if (this.failedWith) throw this.failedWith;
    return result;
  }

  /** For a call without `settle`: the failure that ended it first. */
  rejected(err: unknown): never {
    this.finish();
    throw this.failedWith ?? (err instanceof Error ? err : new Error(String(err)));
  }

  private watch(signal: AbortSignal): void {
    this.watched = signal;
    if (signal.aborted) return this.fail(abortReason(signal), signal.reason);
    this.onAbort = () => this.fail(abortReason(signal), signal.reason);
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  private finish(): boolean {
    if (!this.running.delete(this)) return false;
    if (this.onAbort) this.watched?.removeEventListener('abort', this.onAbort);
    this.progress?.stop();
    return true;
  }
}

const stopped = () => new ProtocolError(ErrorCode.Unavailable, 'Sandbox unavailable: the sandbox was stopped');

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
}
