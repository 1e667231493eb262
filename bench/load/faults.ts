/**
 * The faults of `npm run load -- --faults`, applied from outside as they would happen: once a
 * set share of the calls has started, SIGKILL the Redis master (and wait for Sentinel to promote
 * the replica); once a later share has started, SIGKILL the executor holding shard 0's lease
 * (and wait for another executor to hold it). Times are performance.now() values.
 */
import { until } from '../lib/redis-ha';
import type { FaultArgs } from './args';
import type { LoadStack } from './stack';

export interface FaultTimeline {
  masterKilledAt?: number;
  promotedAt?: number;
  oldMasterPort?: number;
  newMasterPort?: number;
  executorKilledAt?: number;
  killedExecutor?: string;
  takenOverAt?: number;
  takenOverBy?: string;
  /** Why the sequence stopped short, if it did. */
  error?: string;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const SHARD = 0;

export class FaultDriver {
  readonly timeline: FaultTimeline = {};
  private claimed = 0;
  private finished = false;
  private sequence: Promise<void> | undefined;

  constructor(
    private readonly stack: LoadStack,
    private readonly args: FaultArgs,
    private readonly calls: number,
  ) {}

  /** The number of calls started so far; the first call starts the sequence. */
  onClaimed(claimed: number): void {
    this.claimed = claimed;
    this.sequence ??= this.run()
      .catch((err: unknown) => void (this.timeline.error = err instanceof Error ? err.message : String(err)))
      .finally(() => (this.finished = true));
  }

  /** Every fault applied and recovered from (or the sequence failed: see timeline.error). */
  get done(): boolean {
    return this.finished;
  }

  /** When the last fault was seen recovered: the takeover. */
  get recoveredAt(): number | undefined {
    return this.timeline.takenOverAt;
  }

  async wait(): Promise<void> {
    await this.sequence;
  }

  private async reach(share: number): Promise<void> {
    while (this.claimed < share * this.calls) await sleep(20);
  }

  private async run(): Promise<void> {
    const { ha, executors, executorIds } = this.stack;
    if (!ha) throw new Error('the fault run needs the Sentinel group');
    await this.reach(this.args.killMasterAt);
    process.stderr.write('load: SIGKILL the Redis master\n');
    const master = await ha.killMaster();
    Object.assign(this.timeline, {
      masterKilledAt: master.killedAt,
      promotedAt: master.promotedAt,
      oldMasterPort: master.oldPort,
      newMasterPort: master.newPort,
    });

    await this.reach(this.args.killExecutorAt);
    const holder = await until('a holder of shard 0', 30_000, () => this.stack.leaseHolder(SHARD));
    const victim = executors[executorIds.indexOf(holder)];
    if (!victim) throw new Error(`shard ${SHARD}'s lease is held by "${holder}", not one of this run's executors`);
    process.stderr.write(`load: SIGKILL executor ${holder} (it holds shard ${SHARD})\n`);
    this.timeline.killedExecutor = holder;
    this.timeline.executorKilledAt = performance.now();
    process.kill(victim.pid, 'SIGKILL');
    await victim.exited;
    this.timeline.takenOverBy = await until(
      `another executor to take shard ${SHARD}`,
      120_000,
      async () => {
        const now = await this.stack.leaseHolder(SHARD);
        return now !== undefined && now !== holder ? now : undefined;
      },
      50,
    );
    this.timeline.takenOverAt = performance.now();
  }
}
