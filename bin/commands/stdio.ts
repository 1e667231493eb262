/**
 * `toolgate stdio`: the embedded server for one local agent. JSON-RPC over stdin/stdout, tools
 * against one workspace root, logs on stderr. Exits 0 when stdin ends (after running calls
 * finish, within the grace time) and on SIGTERM/SIGINT.
 */
import { parsePermissionList, Permission, PERMISSIONS } from '../../shared/auth/permissions';
import type { Config } from '../../shared/config';
import { SANDBOX_BACKENDS } from '../../executor/sandbox/registry';
import { sandboxOwner } from '../../executor/sandbox/owner';
import { SingleSandbox } from '../../executor/sandbox/single';
import { SandboxToolRunner } from '../../executor/sandbox-runner';
import { Logger } from '../../shared/log';
import { createMcpServer, edgeOptions } from '../../shared/mcp/server';
import { MemoryTaskStore } from '../../shared/tasks/memory-store';
import { Session } from '../../shared/mcp/session';
import { createHttpPolicy, readUpstreamCa, upstreamTrust } from '../../shared/tools/http/policy';
import { ALL_TOOLS } from '../../shared/tools/index';
import { LocalToolRunner } from '../../shared/tools/local-runner';
import { ToolRegistry } from '../../shared/tools/registry';
import { StdioTransport } from '../../shared/transport/stdio';
import { Workspace } from '../../shared/workspace/workspace';
import { parseFlags, settingsHelp, UsageError } from '../flags';
import type { Command } from './command';
import { defaultRoot } from './default-root';
import { LOG_FORMAT, LOG_LEVEL } from './settings';

const STDIO_SETTINGS = [LOG_LEVEL, LOG_FORMAT] as const;

export const STDIO_USAGE = `Usage: toolgate stdio [--root DIR] [--permissions LIST] [--sandbox none|bwrap] [--log-level LEVEL]

  --root DIR          workspace the file and command tools work in (default: the current directory,
                      unless it is / or the home directory: those must be named with --root)
  --permissions LIST  comma-separated permissions to grant (default: all of ${PERMISSIONS.join(',')})
  --sandbox NAME      where file and command tools run (default: TOOLGATE_SANDBOX, else none):
                        none   in this process, confined by path checks (single local user)
                        bwrap  bubblewrap: no network, read-only system, unprivileged uid
${settingsHelp(STDIO_SETTINGS)}
      (logs go to stderr; stdout carries only JSON-RPC)`;

export async function runStdio(argv: readonly string[], config: Readonly<Config>, log: Logger): Promise<number> {
  const flags = parseFlags(argv, { values: ['root', 'permissions', 'sandbox'] });
  const root = (flags.get('root') as string | undefined) ?? defaultRoot();
  let permissions: Permission[] = [...PERMISSIONS];
  const list = flags.get('permissions');
  if (typeof list === 'string') {
    const parsed = parsePermissionList(list);
    if (parsed.unknown.length > 0)
      throw new UsageError(`unknown permission ${parsed.unknown.map((p) => `"${p}"`).join(', ')}; known: ${PERMISSIONS.join(', ')}`);
    permissions = parsed.permissions;
  }

  const flag = flags.get('sandbox') as string | undefined;
  const sandboxName = flag ?? config.sandbox;
  // An unknown flag value is a usage error; an unknown TOOLGATE_SANDBOX, a configuration one.
  const chosen = flag === undefined ? SANDBOX_BACKENDS.get(config.sandbox) : SANDBOX_BACKENDS.find(flag);
  if (!chosen) throw new UsageError(`--sandbox must be one of ${SANDBOX_BACKENDS.ids.join(', ')}, got "${sandboxName}"`);

  const workspace = await Workspace.open(root, config.limits.maxPathLength);
  const registry = new ToolRegistry(ALL_TOOLS);
  const http = createHttpPolicy(config.httpAllow, { upstreamTls: upstreamTrust(await readUpstreamCa(config.egress.caFile)) });
  const onUnexpectedError = (err: unknown, tool: string) => log.error({ err, tool }, 'tool failed unexpectedly');
  const trusted = new LocalToolRunner({ trusted: { limits: config.limits, http }, onUnexpectedError });
  // Embedded: on `none` the tools run right here (sandbox/in-process.ts). No sandbox means no wall
  // between the tools and this user, so a separate agent process would add only a process hop:
  // measured, it doubles a read_file round trip.
  const backend = chosen.create(chosen.section(config), {
    role: 'stdio',
    log,
    embedded: true,
    onStderr: (line) => log.warn({ sandbox: sandboxName, line }, 'sandbox agent stderr'),
  });
  if (sandboxName === 'none')
    log.warn({ sandbox: 'none' }, 'sandbox "none": tools run in this process as this user, confined only by path checks; for a single local user only');
  // The sandbox runs as the root's owner, so the files it writes stay theirs.
  const owner = await sandboxOwner(workspace.root);
  const sandbox = new SingleSandbox(backend, { workspace: workspace.root, limits: config.limits, tenant: 'local', ...owner }, (reason) =>
    log.warn({ reason }, 'sandbox agent died; starting a new one'),
  );
  // Start now: a backend that cannot run must fail start-up with its reason, not the first call.
  await sandbox.get();
  // The MCP server below parses every call's arguments before the runner hands them to the sandbox.
  const runner = new SandboxToolRunner(
    () => sandbox.now(),
    trusted,
    () => sandbox.stop(),
  );
  log.info({ sandbox: sandboxName }, `sandbox backend: ${sandboxName}`);
  const dispatcher = createMcpServer({
    registry,
    runner,
    ...edgeOptions(config),
    onUnexpectedError: (err, method) => log.error({ err, method }, 'request failed unexpectedly'),
    // stdio: the tasks live in this process, for as long as the agent keeps it.
    tasks: { ...config.tasks, store: new MemoryTaskStore() },
  });
  const transport = new StdioTransport(process.stdin, process.stdout, config.protocol.maxMessageBytes);
  const session = new Session(
    transport,
    dispatcher,
    { tenant: 'local', permissions: new Set(permissions) },
    {
      drainMs: config.shutdownGraceMs,
      onInternalError: (err) => log.error({ err }, 'stdio session error'),
    },
  );

  const stop = () => void session.stop();
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  log.info({ root: workspace.root, permissions }, 'toolgate stdio ready');
  await session.start();
  await session.finished();
  await runner.close();
  return 0;
}

export const stdioCommand: Command = { summary: 'serve one local agent over stdin/stdout', usage: STDIO_USAGE, settings: STDIO_SETTINGS, run: runStdio };
