/**
 * Runs each tool where it belongs: file and command tools in the caller's sandbox, http_request
 * here in the trusted process (the sandbox has no network by design).
 */
import type { Caller } from '../shared/auth/permissions';
import { CallExtras, CallSignal, signalOf, ToolRunner } from '../shared/tools/runner';
import type { AnyTool, ToolResult } from '../shared/tools/tool';
import type { Sandbox } from './sandbox/backend';

export class SandboxToolRunner implements ToolRunner {
  constructor(
    private readonly sandboxFor: (caller: Caller) => Promise<Sandbox>,
    private readonly trusted: ToolRunner,
    private readonly onClose: () => Promise<void>,
  ) {}

  async run(tool: AnyTool, args: unknown, caller: Caller, signal: CallSignal, extras?: CallExtras): Promise<ToolResult> {
    if (tool.host === 'trusted') return this.trusted.run(tool, args, caller, signal, extras);
    const sandbox = await this.sandboxFor(caller);
    return sandbox.call(tool.name, args, signalOf(signal), extras?.onProgress);
  }

  async close(): Promise<void> {
    await Promise.all([this.onClose(), this.trusted.close()]);
  }
}
