/**
 * Fault: the Cluster master holding toolgate's slot SIGKILLed while 64 callers run (redis-failover.ts
 * says what is checked), with tasks running across it (tasks-across-failover.ts). Real processes:
 * redis-server ×6 (three masters, a replica each), `toolgate serve`, a `toolgate executor`, all on
 * TOOLGATE_REDIS_CLUSTER_NODES.
 */
import { RedisHa, startRedisCluster } from '../../bench/lib/redis-ha';
import { describeFailover, startFailoverStack } from './redis-failover';
import type { FaultStack } from './stack';
import { runFailoverWithTasks } from './tasks-across-failover';

jest.setTimeout(150_000);

describeFailover('fault: a Redis Cluster master killed under load', () => {
  let ha: RedisHa;
  let stack: FaultStack;

  beforeAll(async () => {
    ha = await startRedisCluster();
    // The Sentinel suite runs at the default job lock (5 s); a Cluster promotion here takes 2.3–3.5 s,
    // longer on a loaded machine, so this one sets the lock from it, as docs/deployment.md advises.
    stack = await startFailoverStack(ha, { TOOLGATE_JOB_LOCK_MS: '10000' });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await ha?.close();
  });

  it('answers every call, crosses none, runs none twice, recovers by itself and leaks no limit; tasks survive with their own outcome', async () => {
    await runFailoverWithTasks(ha, stack, 'Cluster master killed');
  });
});
