/**
 * Who waits for which start_process process to end, for one sandbox (the agent's
 * `toolgate/processEnded` reports, or the in-process table's). An end may overtake its start's
 * reply, so ends nobody asked about yet are remembered — a few suffice, since such an end is
 * claimed at once; ends of processes nobody counts (no budget) fall out, oldest first.
 */
const MAX_ENDED_EARLY = 256;

export class ProcessEnds {
  private readonly awaiting = new Map<string, () => void>();
  /** Insertion-ordered, bounded. */
  private readonly endedEarly = new Set<string>();

  /** Resolves once `handle`'s process has ended (at once when its end came first). */
  wait(handle: string): Promise<void> {
    if (this.endedEarly.delete(handle)) return Promise.resolve();
    const already = this.awaiting.get(handle);
    return new Promise((resolve) => {
      this.awaiting.set(handle, () => {
        already?.();
        resolve();
      });
    });
  }

  /** `handle`'s process ended. */
  ended(handle: string): void {
    const resolve = this.awaiting.get(handle);
    if (resolve) {
      this.awaiting.delete(handle);
      return resolve();
    }
    this.endedEarly.add(handle);
    if (this.endedEarly.size > MAX_ENDED_EARLY) this.endedEarly.delete(this.endedEarly.values().next().value as string);
  }

  /** The sandbox ended, and every process it held with it. */
  endAll(): void {
    for (const resolve of this.awaiting.values()) resolve();
    this.awaiting.clear();
  }
}
