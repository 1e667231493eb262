/**
 * A pre-started agent (the docker backend's warm pool, sandbox/docker-pool.ts) starts with no
 * workspace: its root is an empty directory of the pool's until the executor bind-mounts a
 * tenant's workspace over it. Until then the agent holds nothing of any tenant (no directory, no
 * handle, no file) and refuses every tool. `sandbox/bind` — once, never again, so a pre-started
 * sandbox serves one tenant only — enters the workspace now mounted at the root, opens it, and
 * answers with the device and inode it sees there, so the executor can check that the mount it
 * made is the one the agent sees before the first call goes in.
 */
import { statSync } from 'node:fs';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import type { CallExtras, CallSignal } from '../../shared/tools/runner';
import type { AnyTool, ToolResult } from '../../shared/tools/tool';
import type { AgentTools } from './agent-server';
import type { BoundRoot } from './protocol';

export class WorkspaceBinding implements AgentTools {
  private inner: AgentTools | undefined;
  private bound = false;

  /** `open` opens the workspace at `root` (the process is already in it) and returns its runner. */
  constructor(
    private readonly root: string,
    private readonly open: () => Promise<AgentTools>,
  ) {}

  /** Serves `sandbox/bind`. */
  async bind(): Promise<BoundRoot> {
    if (this.bound)
      throw new ProtocolError(ErrorCode.InvalidRequest, 'Invalid Request: this sandbox is already bound to a workspace; a sandbox serves one only');
    this.bound = true;
    process.chdir(this.root); // the mount now on top of the root, not the empty directory below it
    const st = statSync('.');
    this.inner = await this.open();
    return { dev: st.dev, ino: st.ino };
  }

  run(tool: AnyTool, args: unknown, signal: CallSignal, extras?: CallExtras): Promise<ToolResult> {
    if (!this.inner) return Promise.reject(new ProtocolError(ErrorCode.Unavailable, 'Sandbox unavailable: it has no workspace yet'));
    return this.inner.run(tool, args, signal, extras);
  }
}
