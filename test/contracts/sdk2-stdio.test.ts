/**
 * The SDK 2.x client contract over `toolgate stdio` (the built binary, sandbox none): one
 * process per client, granted the client's permissions with --permissions, all in one root.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { BIN } from '../stdio/server';
import { sdk2ClientContract } from './sdk2-client.suite';

sdk2ClientContract('toolgate stdio', async (settings) => {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-sdk2-stdio-'));
  let stderr = '';
  return {
    transport(permissions) {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [BIN, 'stdio', '--root', root, '--permissions', permissions.join(','), '--sandbox', 'none'],
        env: { ...getDefaultEnvironment(), TOOLGATE_LOG_LEVEL: 'warn', TOOLGATE_DATA_DIR: path.join(root, '.toolgate'), ...settings },
        stderr: 'pipe',
      });
      transport.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-8000)));
      return transport;
    },
    logs: () => stderr,
    close: () => fs.rm(root, { recursive: true, force: true }),
  };
});
