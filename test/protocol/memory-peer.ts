/**
 * The in-process server: createMcpServer + Session over an InMemoryTransport pair, with the real
 * tools against a fresh temp workspace (or a registry/runner the test brings).
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Caller, Permission, PERMISSIONS } from '../../shared/auth/permissions';
import { loadConfig } from '../../shared/config';
import { createMcpServer } from '../../shared/mcp/server';
import { Session } from '../../shared/mcp/session';
import type { DispatcherLimits } from '../../shared/protocol/dispatcher';
import type { ProcessHost } from '../../shared/tools/commands/process-host';
import { ALL_TOOLS } from '../../shared/tools/index';
import { LocalToolRunner } from '../../shared/tools/local-runner';
import { ToolRegistry } from '../../shared/tools/registry';
import type { ToolRunner } from '../../shared/tools/runner';
import { InMemoryTransport } from '../../shared/transport/in-memory';
import { Workspace } from '../../shared/workspace/workspace';
import { PeerOptions, ReplyQueue, WirePeer } from './wire';

export interface MemoryPeerOptions extends PeerOptions {
  registry?: ToolRegistry;
  runner?: ToolRunner;
  limits?: DispatcherLimits;
}

export interface MemoryPeer extends WirePeer {
  root: string;
  session: Session<Caller>;
}

export async function memoryPeer(options: MemoryPeerOptions = {}): Promise<MemoryPeer> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-proto-'));
  const config = loadConfig({}, root);
  const runner =
    options.runner ??
    new LocalToolRunner({
      // The protocol suites use the file tools only: no process table, no trusted (HTTP) host.
      sandbox: { workspace: await Workspace.open(root), limits: config.limits, processes: { closeAll: () => undefined } as unknown as ProcessHost },
    });
  const registry = options.registry ?? new ToolRegistry(ALL_TOOLS);
  const dispatcher = createMcpServer({ registry, runner, limits: options.limits ?? config.protocol });
  const permissions = new Set<Permission>(options.permissions ?? PERMISSIONS);

  const [client, server] = InMemoryTransport.pair();
  const internalErrors: unknown[] = [];
  const caller: Caller = { tenant: 'test', permissions };
  const session = new Session<Caller>(server, dispatcher, caller, {
    drainMs: 1000,
    onInternalError: (err) => void internalErrors.push(err),
  });
  const replies = new ReplyQueue();
  client.onmessage = (frame) => replies.push(frame);
  await session.start();
  await client.start();

  return {
    root,
    session,
    send: (frame) => client.send(frame),
    next: (timeoutMs) => replies.next(timeoutMs),
    async close() {
      try {
        await client.close();
        await session.finished();
        await runner.close();
      } finally {
        await fs.rm(root, { recursive: true, force: true });
      }
      // A session error (a reply that could not be sent, a bug in dispatch) fails the test.
      if (internalErrors.length > 0) throw new Error(`session reported internal errors: ${internalErrors.map(String).join('; ')}`);
    },
  };
}
