/**
 * Runs tools in this process, each with the context its host provides. Used inside the sandbox
 * agent (sandbox tools against its workspace) and in trusted processes (http_request).
 */
import { ProtocolError, ToolError } from '../protocol/errors';
import { errorResult } from './result';
import { CallExtras, CallSignal, signalOf, ToolRunner } from './runner';
import type { AnyTool, SandboxContext, ToolResult, TrustedContext } from './tool';

export interface LocalHosts {
  sandbox?: Omit<SandboxContext, 'signal'>;
  trusted?: Omit<TrustedContext, 'signal'>;
  /** Called with unexpected errors (bugs), which reach the caller only as a generic message. */
  onUnexpectedError?: (err: unknown, tool: string) => void;
}

export class LocalToolRunner implements ToolRunner {
  constructor(private readonly hosts: LocalHosts) {}

  async run(tool: AnyTool, args: unknown, _caller: unknown, signal: CallSignal, extras?: CallExtras): Promise<ToolResult> {
    const progress = extras?.onProgress ? { progress: extras.onProgress } : {};
    try {
      // The tool's `signal` is read through, so a tool that never looks at it never makes it.
      if (tool.host === 'sandbox') {
        const host = this.hosts.sandbox;
        if (!host) throw new ToolError(`${tool.name} cannot run here: no sandbox host`);
        return await tool.run(args, { ...host, ...progress, get signal() { return signalOf(signal); } });
      }
      const host = this.hosts.trusted;
      if (!host) throw new ToolError(`${tool.name} cannot run here: no trusted host`);
      return await tool.run(args, { ...host, ...progress, get signal() { return signalOf(signal); } });
    } catch (err) {
      if (err instanceof ToolError) return errorResult(err.message);
      if (err instanceof ProtocolError) throw err;
      this.hosts.onUnexpectedError?.(err, tool.name);
      return errorResult(`${tool.name} failed with an internal error`);
    }
  }

  async close(): Promise<void> {
    this.hosts.sandbox?.processes.closeAll();
  }
}
