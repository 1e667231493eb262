/** `toolgate revoke`: not built yet (the gateway issue). */
import type { Command } from './command';

export const revokeCommand: Command = {
  summary: 'not available yet',
  usage: 'Usage: toolgate revoke (not available yet)',
  async run() {
    throw new Error('toolgate revoke is not available yet');
  },
};
