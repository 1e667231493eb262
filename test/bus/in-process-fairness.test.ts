/**
 * The in-process bus hands a free slot to the tenant served least recently, not to whoever
 * queued first: a tenant with a backlog does not hold another's call behind all of it.
 */
import { InProcessBus } from '../../shared/bus/in-process';
import type { ToolResult } from '../../shared/tools/tool';
import { makeJob, never, textResult, until } from '../contracts/bus.suite';

test("round-robin over tenants: after one of A's jobs, B's waiting job runs before A's backlog", async () => {
  const bus = new InProcessBus();
  const started: string[] = [];
  const release: Array<() => void> = [];
  try {
    await bus.consume(
      (job) =>
        new Promise<ToolResult>((resolve) => {
          started.push(`${job.tenant}:${(job.args as { n: number }).n}`);
          release.push(() => resolve(textResult('ok')));
        }),
      { concurrency: 1 },
    );
    const calls = [1, 2, 3].map((n) => bus.call(makeJob({ tenant: 'a', args: { n } }), never()));
    await until(() => started.length === 1, 'the first job to start');
    calls.push(bus.call(makeJob({ tenant: 'b', args: { n: 1 } }), never()));
    for (let i = 1; i <= 4; i++) {
      release.shift()!();
      if (i < 4) await until(() => started.length === i + 1, `job ${i + 1} to start`);
    }
    await Promise.all(calls);
    expect(started).toEqual(['a:1', 'b:1', 'a:2', 'a:3']);
  } finally {
    await bus.close();
  }
});
