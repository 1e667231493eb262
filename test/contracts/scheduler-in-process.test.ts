import { MemoryQuotaStore } from '../../shared/quota/memory';
import { LeaseScheduler } from '../../gateway/scheduling/lease-scheduler';
import { schedulerContract } from './scheduler.suite';

// One gateway by definition: the two-gateway case is not registered (no peer).
schedulerContract('in-process', { create: async (perTenant) => new LeaseScheduler({ store: new MemoryQuotaStore(), perTenant }) });
