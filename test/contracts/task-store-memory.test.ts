import { MemoryTaskStore } from '../../shared/tasks/memory-store';
import { taskStoreContract } from './task-store.suite';

taskStoreContract('in memory', { create: async () => new MemoryTaskStore() });
