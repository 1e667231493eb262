/**
 * One workspace, one sandbox, started eagerly (so a backend that cannot start fails at once) and
 * started again on the next call if it died (an agent killed by the OOM killer, say).
 */
import type { Sandbox, SandboxBackend, SandboxSpec } from './backend';

export class SingleSandbox {
  private current: Promise<Sandbox> | undefined;

  constructor(
    private readonly backend: SandboxBackend,
    private readonly spec: SandboxSpec,
    private readonly onRestart?: (reason: string) => void,
  ) {}

  /** The live sandbox, started now if there is none. */
  async get(): Promise<Sandbox> {
    const current = this.current && (await this.current.catch(() => undefined));
    if (current?.alive) return current;
    if (current) this.onRestart?.(await current.exited);
    this.current = this.backend.start(this.spec);
    this.current.catch(() => (this.current = undefined));
    return this.current;
  }

  async stop(): Promise<void> {
    const current = this.current && (await this.current.catch(() => undefined));
    this.current = undefined;
    await current?.stop();
  }
}
