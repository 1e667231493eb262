#!/usr/bin/env node
/**
 * The sandbox agent: the program that runs inside a tenant's sandbox and executes the file and
 * command tools against its one workspace. It speaks JSON-RPC (the same MCP core) over its own
 * stdin/stdout; its caller is the trusted executor, so it checks no permissions and does not parse
 * arguments again (see `argumentsParsed` below), but it keeps the workspace wall. It reads no
 * environment: its composition root is its argv (`--root DIR --limits JSON [--run-as UID:GID]
 * [--await-bind]`). It exits when stdin closes, ending its processes. With `--run-as` it starts
 * as root and drops to that uid first (see run-as.ts); with `--await-bind` it is a pre-started
 * sandbox that enters its root only when told (see bind.ts).
 */
import { PERMISSIONS } from '../../shared/auth/permissions';
import { DEFAULT_LIMITS, ToolLimits } from '../../shared/limits';
import { createMcpServer } from '../../shared/mcp/server';
import { Session } from '../../shared/mcp/session';
import { COMMAND_TOOLS } from '../../shared/tools/commands/index';
import { PROCESS_ENDED } from '../../shared/tools/commands/process-host';
import { ProcessTable } from '../../shared/tools/commands/process-table';
import { FILE_TOOLS } from '../../shared/tools/files/index';
import { LocalToolRunner } from '../../shared/tools/local-runner';
import { ToolRegistry } from '../../shared/tools/registry';
import { StdioTransport } from '../../shared/transport/stdio';
import { setWorkspaceQuota, WorkspaceQuotaLimits } from '../../shared/workspace/quota';
import { Workspace } from '../../shared/workspace/workspace';
import { WorkspaceBinding } from './bind';
import { collectAfterStart } from './start-gc';
import { dropTo, parseRunAs } from './run-as';

/** Frames from the executor are bounded by its own message limit; this is a backstop. */
const MAX_FRAME_BYTES = 256 * 1024 * 1024;

function argValue(argv: readonly string[], name: string): string | undefined {
  const i = argv.indexOf(name);
  return i === -1 ? undefined : argv[i + 1];
}

async function main(argv: readonly string[]): Promise<void> {
  const root = argValue(argv, '--root');
  if (!root) throw new Error('usage: agent --root DIR [--limits JSON] [--run-as UID:GID] [--await-bind]');
  // Before anything else, and before a byte of input is read: see run-as.ts.
  const runAs = argValue(argv, '--run-as');
  if (runAs !== undefined) dropTo(parseRunAs(runAs));
  const awaitBind = argv.includes('--await-bind');
  if (!awaitBind) process.chdir(root); // commands start here; only now may this uid enter a 0700 workspace
  const limitsJson = argValue(argv, '--limits');
  const given = limitsJson ? (JSON.parse(limitsJson) as Partial<ToolLimits> & WorkspaceQuotaLimits) : {};
  const limits: ToolLimits = { ...DEFAULT_LIMITS, ...given };
  // The executor enforces the workspace quota; the agent only names it when a write hits it.
  setWorkspaceQuota(given);

  const transport = new StdioTransport(process.stdin, process.stdout, MAX_FRAME_BYTES);
  // Each process's end goes up as it happens: the executor counts live processes per identity.
  const processes = new ProcessTable(limits, (handle) => void transport.send(JSON.stringify({ jsonrpc: '2.0', method: PROCESS_ENDED, params: { handle } })));
  const open = async () =>
    new LocalToolRunner({
      sandbox: { workspace: await Workspace.open(root, limits.maxPathLength), limits, processes },
      onUnexpectedError: (err, tool) => process.stderr.write(`agent: ${tool} failed: ${err instanceof Error ? err.stack : String(err)}\n`),
    });
  const binding = awaitBind ? new WorkspaceBinding(root, open) : undefined;
  const runner = binding ?? (await open());
  const dispatcher = createMcpServer({
    registry: new ToolRegistry([...FILE_TOOLS, ...COMMAND_TOOLS]),
    runner,
    enforcePermissions: false,
    // Trust, in one direction: every call comes from the executor, which parsed its arguments
    // against the same tool schemas (executor/job-handler.ts; stdio's sandboxed runner after the
    // MCP server's parse) before sending them, so the agent runs them as received and never loads
    // zod (~10 MiB of its RSS). What the arguments reach is still bounded by the sandbox itself
    // (namespaces, the workspace wall in every tool); the executor, in turn, treats everything the
    // agent sends back as untrusted (agent-client.ts, reply-limits.ts).
    argumentsParsed: true,
    limits: { maxDepth: 256, maxBatch: 1 },
    // The executor paces progress for the client; from here each new line goes up, coalesced.
    progress: { mode: 'relay', minGapMs: 100 },
    ...(binding ? { extraMethods: binding.methods() } : {}),
  });
  const session = new Session(transport, dispatcher, { id: 'executor', permissions: new Set(PERMISSIONS) }, { drainMs: 1000 });
  const stop = () => {
    processes.closeAll();
    void session.stop();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await session.start();
  // Start-up is done: give back what it left in the heap (see start-gc.ts).
  collectAfterStart();
  await session.finished();
  processes.closeAll();
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`agent: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
