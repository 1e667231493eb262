/** `toolgate shim`: not built yet (the gateway issue). */
import type { Command } from './command';

export const shimCommand: Command = {
  summary: 'not available yet',
  usage: 'Usage: toolgate shim (not available yet)',
  async run() {
    throw new Error('toolgate shim is not available yet');
  },
};
