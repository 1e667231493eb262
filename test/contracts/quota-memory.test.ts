import { MemoryQuotaStore } from '../../shared/quota/memory';
import { quotaStoreContract } from './quota-store.suite';

// One process by definition: the two-process cases are not registered (no peer).
quotaStoreContract('memory', { create: async () => new MemoryQuotaStore() });
