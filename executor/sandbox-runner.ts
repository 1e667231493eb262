/**
 * Runs each tool where it belongs: file and command tools in the caller's sandbox, http_request
 * here in the trusted process (the sandbox has no network by design).
 */
import type { Caller } from '../shared/auth/permissions';
import type { CallExtras, CallSignal, ToolRunner } from '../shared/tools/runner';
import type { AnyTool, ToolResult } from '../shared/tools/tool';
import type { Sandbox } from './sandbox/backend';

export class SandboxToolRunner implements ToolRunner {
  constructor(
    /** The caller's sandbox: the live one as it is when there is one (no promise on the way to it), else once started. */
    private readonly sandboxFor: (caller: Caller) => Sandbox | Promise<Sandbox>,
    private readonly trusted: ToolRunner,
    private readonly onClose: () => Promise<void>,
  ) {}

  /** Not `async`: stdio's read_file comes through here, and each promise layer is a cost per call. */
  run(tool: AnyTool, args: unknown, caller: Caller, signal: CallSignal, extras?: CallExtras): Promise<ToolResult> {
    if (tool.host === 'trusted') return this.trusted.run(tool, args, caller, signal, extras);
    // The signal is handed on as it is: a sandbox reads it only if it must (backend.ts).
    const sandbox = this.sandboxFor(caller);
    if (sandbox instanceof Promise) return sandbox.then((s) => s.call(tool.name, args, signal, extras?.onProgress));
    return sandbox.call(tool.name, args, signal, extras?.onProgress);
  }

  async close(): Promise<void> {
    await Promise.all([this.onClose(), this.trusted.close()]);
  }
}
