/** `toolgate serve`: not built yet (the gateway issue). */
import type { Command } from './command';

export const serveCommand: Command = {
  summary: 'not available yet',
  usage: 'Usage: toolgate serve (not available yet)',
  async run() {
    throw new Error('toolgate serve is not available yet');
  },
};
