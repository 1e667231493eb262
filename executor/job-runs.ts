/**
 * The jobs this executor runs and ran: the running ones, so a shutdown can wait for them within
 * its grace time, and the finished ones for a while, so the audit can tell the calls this
 * executor ran from those another ran (on Redis every executor sees every event).
 */

/** How long the executor remembers a job it ran, so the audit can tell its outcome events apart. */
const RAN_HERE_RETAIN_MS = 5 * 60_000;

export class JobRuns {
  /** Job id → when it finished (Infinity while running). */
  private readonly ran = new Map<string, number>();
  private readonly running = new Set<Promise<unknown>>();
  private readonly sweeper: NodeJS.Timeout;

  constructor() {
    this.sweeper = setInterval(() => {
      const cutoff = Date.now() - RAN_HERE_RETAIN_MS;
      for (const [id, finished] of this.ran) if (finished < cutoff) this.ran.delete(id);
    }, 60_000);
    this.sweeper.unref();
  }

  /** Follows a job from now until `run` settles; returns `run` itself. */
  track<T>(jobId: string, run: Promise<T>): Promise<T> {
    this.ran.set(jobId, Infinity);
    const tracked = run.finally(() => {
      this.ran.set(jobId, Date.now());
      this.running.delete(tracked);
    });
    this.running.add(tracked);
    tracked.catch(() => undefined);
    return run;
  }

  /** Whether this executor ran (or runs) the job. */
  ranHere(jobId: string): boolean {
    return this.ran.has(jobId);
  }

  /** Resolves when every running job has settled, or after `graceMs`, whichever is first. */
  async settled(graceMs?: number): Promise<void> {
    if (graceMs === undefined) {
      await Promise.allSettled([...this.running]);
      return;
    }
    let grace: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.running]), new Promise((r) => (grace = setTimeout(r, graceMs)))]);
    clearTimeout(grace);
  }

  stop(): void {
    clearInterval(this.sweeper);
  }
}
