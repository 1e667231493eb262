/**
 * One workspace, one sandbox, started eagerly (so a backend that cannot start fails at once) and
 * started again on the next call if it died (an agent killed by the OOM killer, say).
 */
import type { Sandbox, SandboxBackend, SandboxSpec } from './backend';

export class SingleSandbox {
  private current: Promise<Sandbox> | undefined;
  /** The started sandbox, once `current` has resolved to it. */
  private started: Sandbox | undefined;

  constructor(
    private readonly backend: SandboxBackend,
    private readonly spec: SandboxSpec,
    private readonly onRestart?: (reason: string) => void,
  ) {}

  /** The live sandbox as it is, without a promise; else `get()`. */
  now(): Sandbox | Promise<Sandbox> {
    return this.started?.alive ? this.started : this.get();
  }

  /** The live sandbox, started now if there is none. */
  async get(): Promise<Sandbox> {
    const current = this.current && (await this.current.catch(() => undefined));
    if (current?.alive) return current;
    if (current) this.onRestart?.(await current.exited);
    this.started = undefined;
    const starting = (this.current = this.backend.start(this.spec));
    starting.then(
      (s) => void (this.current === starting && (this.started = s)),
      () => void (this.current === starting && (this.current = undefined)),
    );
    return starting;
  }

  async stop(): Promise<void> {
    const current = this.current && (await this.current.catch(() => undefined));
    this.current = undefined;
    this.started = undefined;
    await current?.stop();
  }
}
