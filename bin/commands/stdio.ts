/**
 * `toolgate stdio`: the embedded server for one local agent. JSON-RPC over stdin/stdout, tools
 * against one workspace root, logs on stderr. Exits 0 when stdin ends (after running calls
 * finish, within the grace time) and on SIGTERM/SIGINT.
 */
import { parsePermissionList, Permission, PERMISSIONS } from '../../shared/auth/permissions';
import { Config } from '../../shared/config';
import { Logger } from '../../shared/log';
import { createMcpServer } from '../../shared/mcp/server';
import { Session } from '../../shared/mcp/session';
import { ALL_TOOLS } from '../../shared/tools/index';
import { LocalToolRunner } from '../../shared/tools/local-runner';
import { ToolRegistry } from '../../shared/tools/registry';
import { StdioTransport } from '../../shared/transport/stdio';
import { Workspace } from '../../shared/workspace/workspace';
import { parseFlags, UsageError } from '../flags';

export const STDIO_USAGE = `Usage: toolgate stdio [--root DIR] [--permissions LIST]

  --root DIR          workspace the file and command tools work in (default: the current directory)
  --permissions LIST  comma-separated permissions to grant (default: all of ${PERMISSIONS.join(',')})`;

export async function runStdio(argv: readonly string[], config: Readonly<Config>, log: Logger): Promise<number> {
  const flags = parseFlags(argv, { values: ['root', 'permissions'] });
  const root = (flags.get('root') as string | undefined) ?? process.cwd();
  let permissions: Permission[] = [...PERMISSIONS];
  const list = flags.get('permissions');
  if (typeof list === 'string') {
    const parsed = parsePermissionList(list);
    if (parsed.unknown.length > 0) throw new UsageError(`unknown permission ${parsed.unknown.map((p) => `"${p}"`).join(', ')}; known: ${PERMISSIONS.join(', ')}`);
    permissions = parsed.permissions;
  }

  const workspace = await Workspace.open(root, config.limits.maxPathLength);
  const registry = new ToolRegistry(ALL_TOOLS);
  const runner = new LocalToolRunner({
    sandbox: { workspace, limits: config.limits, processes: { closeAll: () => undefined } },
    trusted: { limits: config.limits, http: { allow: config.httpAllow } },
    onUnexpectedError: (err, tool) => log.error({ err, tool }, 'tool failed unexpectedly'),
  });
  const dispatcher = createMcpServer({ registry, runner, limits: config.protocol });
  const transport = new StdioTransport(process.stdin, process.stdout, config.protocol.maxMessageBytes);
  const session = new Session(transport, dispatcher, { id: 'local', permissions: new Set(permissions) }, {
    drainMs: config.shutdownGraceMs,
    onInternalError: (err) => log.error({ err }, 'stdio session error'),
  });

  const stop = () => void session.stop();
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  log.info({ root: workspace.root, permissions }, 'toolgate stdio ready');
  await session.start();
  await session.finished();
  await runner.close();
  return 0;
}
