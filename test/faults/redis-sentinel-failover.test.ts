/**
 * Fault: the Redis master under Sentinel SIGKILLed while 64 callers run (redis-failover.ts says
 * what is checked), with tasks running across it (tasks-across-failover.ts). Real processes:
 * redis-server ×2, redis-sentinel ×3, `toolgate serve`, a `toolgate executor`, all on
 * TOOLGATE_REDIS_SENTINELS.
 */
import { RedisHa, startSentinelGroup } from '../../bench/lib/redis-ha';
import { describeFailover, startFailoverStack } from './redis-failover';
import type { FaultStack } from './stack';
import { runFailoverWithTasks } from './tasks-across-failover';

jest.setTimeout(150_000);

describeFailover('fault: the Redis master under Sentinel killed under load', () => {
  let ha: RedisHa;
  let stack: FaultStack;

  beforeAll(async () => {
    ha = await startSentinelGroup();
    stack = await startFailoverStack(ha);
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await ha?.close();
  });

  it('answers every call, crosses none, runs none twice, recovers by itself and leaks no limit; tasks survive with their own outcome', async () => {
    await runFailoverWithTasks(ha, stack, 'Sentinel master killed');
  });
});
