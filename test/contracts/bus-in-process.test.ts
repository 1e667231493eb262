import { InProcessBus } from '../../shared/bus/in-process';
import { busContract } from './bus.suite';

// One process by definition: the "another process" case is skipped by the suite (no peer).
busContract('in-process', { create: async () => new InProcessBus() });
