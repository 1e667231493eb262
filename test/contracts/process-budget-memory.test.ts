import { MemoryQuotaStore } from '../../shared/quota/memory';
import { processBudgetContract } from './process-budget.suite';

// Embedded `serve`: one executor, its count in memory (no peer).
processBudgetContract('memory', { create: async () => new MemoryQuotaStore() });
