/**
 * Per-identity limits are cluster-wide on Redis: two real `toolgate serve` processes on one
 * Redis (with a `toolgate executor`) share one identity's per-minute budget — the calls the two
 * accept add up to exactly the budget — and its in-flight limit.
 */
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { Answer, FaultStack, post } from '../faults/stack';

const BUDGET = 20;

const code = (a: Answer) => ('failure' in a ? a.failure : (a.reply.error?.code ?? 'ok'));
const limitOf = (a: Answer) => ('failure' in a ? undefined : (a.reply.error?.data as { limit?: string } | undefined)?.limit);

describeIf(hasCommand('bwrap') && isRoot, 'needs bubblewrap and root (several identities need a separating sandbox)', 'cluster-wide limits', () => {
  describeRedis('cluster-wide limits: two gateway processes on one Redis', () => {
    let redis: TestRedis;
    let stack: FaultStack;
    let urls: string[];

    beforeAll(async () => {
      redis = await startRedis();
      stack = await FaultStack.start({
        redis,
        // Several identities: `none` serves one.
        sandbox: 'bwrap',
        env: {
          TOOLGATE_CALLS_PER_MINUTE: String(BUDGET),
          TOOLGATE_MAX_CONCURRENT_CALLS: '4',
          TOOLGATE_TENANT_CONCURRENCY: '4',
          TOOLGATE_EXECUTOR_CONCURRENCY: '16',
        },
      });
      urls = [stack.url, (await stack.startReplica()).url];
    }, 90_000);
    afterAll(async () => {
      await stack?.close();
      await redis?.close();
    });

    const call = (i: number, token: string, tool: string, args: Record<string, unknown>) =>
      post(urls[i % 2]!, token, { jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: tool, arguments: args } }, 30_000);

    test('the calls both gateways accept for one identity add up to its per-minute budget', async () => {
      const token = stack.token('budget');
      const answers: Answer[] = [];
      // In rounds of 2, one to each gateway, until well past the budget. (Half its in-flight limit:
      // a finished call's slot is returned in the background, so a round may overlap the last one.)
      for (let round = 0; round < 24; round++) {
        answers.push(...(await Promise.all([0, 1].map((k) => call(round * 2 + k, token, 'list_directory', { path: '.' })))));
      }
      const accepted = answers.filter((a) => code(a) === 'ok');
      const refused = answers.filter((a) => code(a) === -32004);
      expect(accepted.length).toBe(BUDGET);
      expect(refused.length).toBe(answers.length - BUDGET);
      expect(refused.every((a) => limitOf(a) === 'perMinute')).toBe(true);
      // Both gateways took part in the accepted calls (the budget is not one gateway's alone).
      const byGateway = [0, 1].map((g) => answers.filter((a, i) => i % 2 === g && code(a) === 'ok').length);
      expect(byGateway[0]! + byGateway[1]!).toBe(BUDGET);
      expect(Math.min(...byGateway)).toBeGreaterThan(0);
      // Another identity has its own budget.
      expect(code(await call(0, stack.token('other'), 'list_directory', { path: '.' }))).toBe('ok');
    });

    test('the in-flight limit is shared too: of 6 concurrent sleeps over both gateways, 4 run and 2 are refused', async () => {
      const token = stack.token('concurrent');
      const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => call(i, token, 'run_command', { argv: ['sleep', '5'] })));
      expect(answers.filter((a) => code(a) === 'ok').length).toBe(4);
      const refused = answers.filter((a) => code(a) === -32004);
      expect(refused.length).toBe(2);
      expect(refused.every((a) => limitOf(a) === 'concurrent')).toBe(true);
    });
  });
});
