#!/usr/bin/env node
/**
 * The sandbox agent: the program that runs inside a tenant's sandbox and executes the file and
 * command tools against its one workspace. It speaks its own small protocol (protocol.ts) over its
 * stdin/stdout with the trusted executor, which checked the permission and parsed the arguments;
 * it keeps the workspace wall. It reads no environment: its composition root is its argv
 * (`--root DIR --limits JSON [--run-as UID:GID] [--await-bind] [--egress-socket PATH
 * --egress-port N [--egress-ca PATH]]`). It exits when stdin closes, ending its processes. With `--run-as` it starts
 * as root and drops to that uid first (see run-as.ts); with `--await-bind` it is a pre-started
 * sandbox that enters its root only when told (see bind.ts); with `--egress-socket` it relays
 * 127.0.0.1:N to the executor's egress proxy and gives its commands the proxy variables (see
 * egress-relay.ts).
 */
import { DEFAULT_LIMITS, ToolLimits } from '../../shared/limits';
import { COMMAND_TOOLS } from '../../shared/tools/commands/index';
import { ProcessTable } from '../../shared/tools/commands/process-table';
import { FILE_TOOLS } from '../../shared/tools/files/index';
import { LocalToolRunner } from '../../shared/tools/local-runner';
import { StdioTransport } from '../../shared/transport/stdio';
import { setWorkspaceQuota, WorkspaceQuotaLimits } from '../../shared/workspace/quota';
import { Workspace } from '../../shared/workspace/workspace';
import { AgentServer, AgentTools } from './agent-server';
import { WorkspaceBinding } from './bind';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { proxyEnv, trustEnv } from '../../shared/tools/commands/environment';
import { startEgressRelay } from './egress-relay';
import { PROCESS_ENDED } from './protocol';
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
  if (!root) throw new Error('usage: agent --root DIR [--limits JSON] [--run-as UID:GID] [--await-bind] [--egress-socket PATH --egress-port N]');
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
  // Before any command exists, so none can take the port first.
  const egressSocket = argValue(argv, '--egress-socket');
  const relay = egressSocket ? await startEgressRelay(egressSocket, Number(argValue(argv, '--egress-port') ?? 0)) : undefined;
  // The executor's trust bundle is there when it intercepts TLS for hosts with secrets.
  const caBundle = argValue(argv, '--egress-ca');
  // Only a preload that is there: a missing one would stop every node program in the sandbox.
  const fetchPreload = path.join(__dirname, 'fetch-proxy.js');
  const env = relay
    ? { ...proxyEnv(relay.port, existsSync(fetchPreload) ? fetchPreload : undefined), ...(caBundle && existsSync(caBundle) ? trustEnv(caBundle) : {}) }
    : undefined;

  const transport = new StdioTransport(process.stdin, process.stdout, MAX_FRAME_BYTES);
  // Each process's end goes up as it happens: the executor counts live processes per identity.
  const processes = new ProcessTable(limits, (handle) => server.notify(PROCESS_ENDED, { handle }));
  const open = async (): Promise<AgentTools> => {
    const local = new LocalToolRunner({
      sandbox: { workspace: await Workspace.open(root, limits.maxPathLength), limits, processes, ...(env ? { env } : {}) },
      onUnexpectedError: (err, tool) => process.stderr.write(`agent: ${tool} failed: ${err instanceof Error ? err.stack : String(err)}\n`),
    });
    // The agent has no caller of its own: the executor checked who may call what.
    return { run: (tool, args, signal, extras) => local.run(tool, args, undefined, signal, extras) };
  };
  const binding = awaitBind ? new WorkspaceBinding(root, open) : undefined;
  const server: AgentServer = new AgentServer(transport, {
    tools: new Map([...FILE_TOOLS, ...COMMAND_TOOLS].map((t) => [t.name, t])),
    runner: binding ?? (await open()),
    ...(binding ? { bind: () => binding.bind() } : {}),
    drainMs: 1000,
  });
  const stop = () => {
    processes.closeAll();
    void server.stop();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await server.start();
  // Start-up is done: give back what it left in the heap (see start-gc.ts).
  collectAfterStart();
  await server.finished();
  processes.closeAll();
  await relay?.close();
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`agent: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
