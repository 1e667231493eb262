/**
 * The docker backend's warm pool: up to `size` sandboxes started ahead of need, hardened like any
 * other but bound to no tenant (their agent waits for `sandbox/bind`, agent/bind.ts; their
 * /workspace is an empty slot, pool-mounts.ts). A new tenant's first call takes one and binds it
 * to its workspace, which costs a mount and one message instead of a container start and a Node
 * start-up; the pool refills in the background. An entry is handed out once and never comes
 * back: a pooled sandbox serves one tenant, then is removed like any other.
 *
 * A start that fails is reported and not retried until the next take (a broken image must not
 * spin); an entry that dies while waiting is dropped the same way.
 */

export interface PoolEntry {
  readonly alive: boolean;
  readonly exited: Promise<string>;
  /** Ends it (it was never handed out): the container goes, its slot is released. */
  dispose(): Promise<void>;
}

interface Slot<T> {
  starting: Promise<T | undefined>;
  ready: T | undefined;
}

export class WarmPool<T extends PoolEntry> {
  private readonly slots: Slot<T>[] = [];
  private closed = false;

  constructor(
    private readonly size: number,
    private readonly create: () => Promise<T>,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Starts entries up to the size; resolves once every start under way has finished. */
  async warm(): Promise<void> {
    this.fill();
    await Promise.all(this.slots.map((s) => s.starting));
  }

  /**
   * An entry for a new tenant, or undefined when there is none: a ready one first, else the
   * oldest still starting (it started before any new start would). The caller calls `refill`
   * once it has bound the entry, so a new container's start does not compete with the bind.
   */
  async take(): Promise<T | undefined> {
    if (this.closed) return undefined;
    const i = Math.max(
      this.slots.findIndex((s) => s.ready?.alive),
      0,
    );
    const slot = this.slots.splice(i, 1)[0];
    if (!slot) return undefined;
    const entry = await slot.starting;
    return entry?.alive ? entry : undefined;
  }

  /** Stops refilling and disposes of every entry not handed out. */
  async close(): Promise<void> {
    this.closed = true;
    const slots = this.slots.splice(0);
    await Promise.all(slots.map(async (s) => (await s.starting)?.dispose()));
  }

  /** Starts entries up to the size, in the background. */
  refill(): void {
    this.fill();
  }

  private fill(): void {
    while (!this.closed && this.slots.length < this.size) {
      const slot: Slot<T> = { starting: Promise.resolve(undefined), ready: undefined };
      slot.starting = this.create().then(
        (entry) => {
          if (this.closed) {
            void entry.dispose();
            return undefined;
          }
          slot.ready = entry;
          // Dead before anyone took it: drop it (the next take refills).
          void entry.exited.then(() => this.drop(slot));
          return entry;
        },
        (err: unknown) => {
          this.drop(slot);
          this.onError(err);
          return undefined;
        },
      );
      this.slots.push(slot);
    }
  }

  private drop(slot: Slot<T>): void {
    const i = this.slots.indexOf(slot);
    if (i !== -1) this.slots.splice(i, 1);
  }
}
