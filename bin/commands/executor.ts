/** `toolgate executor`: not built yet (the gateway issue). */
import type { Command } from './command';

export const executorCommand: Command = {
  summary: 'not available yet',
  usage: 'Usage: toolgate executor (not available yet)',
  async run() {
    throw new Error('toolgate executor is not available yet');
  },
};
