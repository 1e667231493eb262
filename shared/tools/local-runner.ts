/**
 * Runs tools in this process, each with the context its host provides. Used inside the sandbox
 * agent (sandbox tools against its workspace) and in trusted processes (http_request).
 */
import type { Caller } from '../auth/permissions';
import { ProtocolError, ToolError } from '../protocol/errors';
import { errorResult } from './result';
import { CallExtras, CallSignal, signalOf, ToolRunner } from './runner';
import type { AnyTool, SandboxContext, ToolResult, TrustedContext } from './tool';

export interface LocalHosts {
  sandbox?: Omit<SandboxContext, 'signal'>;
  trusted?: Omit<TrustedContext, 'signal'>;
  /**
   * Called with unexpected errors (bugs), which reach the caller only as a generic message, and
   * with the `cause` of a tool error that carries one (a failure the tool could not explain).
   */
  onUnexpectedError?: (err: unknown, tool: string) => void;
}

/**
 * What a tool receives: its host's context, the progress sink when asked for, and the call's
 * signal read through on first use (a tool that never looks at it never makes it). A class: an
 * object literal that adds keys after a spread, or holds a getter, takes a slow path in V8
 * (~0.7 µs a call, measured on Node 20).
 */
class ToolCallContext {
  readonly #signal: CallSignal;
  // `declare`: no field initializer, so a call without progress has no `progress` key at all.
  declare progress?: (message: string) => void;
  constructor(host: object, signal: CallSignal, progress: ((message: string) => void) | undefined) {
    Object.assign(this, host);
    this.#signal = signal;
    if (progress) this.progress = progress;
  }
  get signal(): AbortSignal {
    return signalOf(this.#signal);
  }
}

export class LocalToolRunner implements ToolRunner {
  constructor(private readonly hosts: LocalHosts) {}

  async run(tool: AnyTool, args: unknown, caller: Caller | undefined, signal: CallSignal, extras?: CallExtras): Promise<ToolResult> {
    try {
      if (tool.host === 'sandbox') {
        const host = this.hosts.sandbox;
        if (!host) throw new ToolError(`${tool.name} cannot run here: no sandbox host`);
        return await tool.run(args, new ToolCallContext(host, signal, extras?.onProgress) as unknown as SandboxContext);
      }
      const host = this.hosts.trusted;
      if (!host) throw new ToolError(`${tool.name} cannot run here: no trusted host`);
      // Trusted tools learn whose call it is (http_request applies that tenant's egress policy and secrets).
      const context = caller ? { ...host, tenant: caller.tenant } : host;
      return await tool.run(args, new ToolCallContext(context, signal, extras?.onProgress) as unknown as TrustedContext);
    } catch (err) {
      if (err instanceof ToolError) {
        if (err.cause !== undefined) this.hosts.onUnexpectedError?.(err.cause, tool.name);
        return errorResult(err.message);
      }
      if (err instanceof ProtocolError) throw err;
      this.hosts.onUnexpectedError?.(err, tool.name);
      return errorResult(`${tool.name} failed with an internal error`);
    }
  }

  async close(): Promise<void> {
    this.hosts.sandbox?.processes.closeAll();
  }
}
