/**
 * The host side of governed egress: one forward proxy channel per sandbox, listening on a Unix
 * socket that only that sandbox can see (bind-mounted into it). The tenant is the channel's:
 * whatever a client sends (Proxy-Authorization included) is never read to decide whose policy
 * applies, and such headers are not passed on.
 *
 * It serves absolute-URI HTTP requests (`GET http://host/path`) and CONNECT host:port (any TCP:
 * HTTPS, git, …; bytes are tunnelled as they are, so TLS stays end to end). For each new upstream
 * connection it reads the tenant's policy (a change applies to the next connection), resolves
 * the name itself, checks every address, and connects to exactly those addresses. A refusal is
 * HTTP 403 with one line, `toolgate egress: refused HOST:PORT: REASON`, which curl, git, npm and
 * pip show as is. Every forwarded request gets its own upstream connection, checked the same way.
 *
 * Built on Node's http server rather than proxy-chain: proxy-chain 3 is ESM-only (this is a
 * CommonJS build on Node 20), listens only on a TCP port, and counts bytes after a connection
 * ends, while a daily byte limit has to stop the chunk that passes it.
 */
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import type * as net from 'node:net';
import type { EgressAccounting } from './accounting';
import { forwardRequest } from './forward';
import type { EgressPolicy } from './policy';
import type { PolicyLookup } from './policy-store';
import type { EgressResolver, ResolvedTarget } from './resolver';
import { interceptConnect } from '../secrets/intercept';
import { rewriteFor } from '../secrets/rewrite';
import type { ChannelSecrets } from '../secrets/service';
import { tunnelConnect } from './tunnel';
import { connectChecked, Reach, Refusal, shown, Target } from './upstream';

export interface EgressChannelOptions {
  /** Whose policy and limits apply to every connection on this channel. */
  tenant: string;
  /** Where to listen; a stale file there is replaced. */
  socketPath: string;
  policies: PolicyLookup;
  resolver: EgressResolver;
  /** Shared by every channel of the executor. */
  accounting: EgressAccounting;
  /** Default 10000. */
  connectTimeoutMs?: number;
  /** A tunnel or request with no bytes either way for this long is closed. Default 600000. */
  idleTimeoutMs?: number;
  /** The socket file's mode (default 0o666: the sandbox's uid must connect; the directory guards it). */
  socketMode?: number;
  /**
   * Secrets hook (executor/secrets/): for hosts that have one of the tenant's secrets, plain HTTP
   * requests get placeholders swapped and CONNECT is intercepted with the executor's CA; every
   * other host is untouched. Absent: no interception at all.
   */
  secrets?: ChannelSecrets;
}

export interface EgressChannel {
  readonly tenant: string;
  readonly socketPath: string;
  /** Stops listening, ends every connection of the channel and removes the socket file. */
  close(): Promise<void>;
}

export async function openEgressChannel(options: EgressChannelOptions): Promise<EgressChannel> {
  const { tenant, policies, resolver, accounting } = options;
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  const idleTimeoutMs = options.idleTimeoutMs ?? 600_000;
  const sockets = new Set<net.Socket>();

  /** The checked addresses for target, or the refusal (reported to accounting). */
  const vet = async (target: Target): Promise<readonly string[] | Refusal> => {
    const refuse = (reason: string, status = 403): Refusal => {
      accounting.denied(tenant, target.host, target.port, reason);
      return { status, line: `toolgate egress: refused ${shown(target)}: ${reason}` };
    };
    let policy: EgressPolicy;
    try {
      policy = (await policies(tenant)).policy;
    } catch {
      return refuse('the egress policy could not be read', 503);
    }
    const first = policy.decide({ ...target, pinned: resolver.isPinned(target.host) });
    if (!first.allowed) return refuse(first.reason);
    let resolved: ResolvedTarget;
    try {
      resolved = await resolver.resolve(target.host);
    } catch (err) {
      return refuse(`cannot resolve ${target.host} (${(err as NodeJS.ErrnoException).code ?? 'error'})`, 502);
    }
    if (resolved.addresses.length === 0) return refuse(`cannot resolve ${target.host} (no addresses)`, 502);
    for (const address of resolved.addresses) {
      const decision = policy.decide({ ...target, address, pinned: resolved.pinned });
      if (!decision.allowed) return refuse(decision.reason);
    }
    return resolved.addresses;
  };

  /** Vets, takes a slot and connects: the upstream socket and its lease, or a refusal. */
  const reach: Reach = async (target, onread) => {
    const addresses = await vet(target);
    if (!Array.isArray(addresses)) return addresses as Refusal;
    const lease = accounting.open(tenant, target.host, target.port);
    if ('refused' in lease) return { status: 403, line: `toolgate egress: refused ${shown(target)}: ${lease.refused}` };
    try {
      const upstream = await connectChecked(addresses, target.port, connectTimeoutMs, onread);
      sockets.add(upstream);
      upstream.once('close', () => sockets.delete(upstream));
      upstream.setTimeout(idleTimeoutMs, () => upstream.destroy());
      lease.connected(upstream.remoteAddress ?? addresses[0] ?? '');
      return { upstream, lease };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      lease.close(code);
      return { status: 502, line: `toolgate egress: cannot connect to ${shown(target)} (${code})` };
    }
  };

  const server = http.createServer({ requestTimeout: 0 });
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  // Secrets hooks: a lookup per request or CONNECT when the executor has secrets on, nothing otherwise.
  const secrets = options.secrets;
  const rewrite = secrets && rewriteFor(tenant, secrets);
  server.on('request', (req, res) => void forwardRequest(req, res, reach, rewrite));
  server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    if (!secrets) return void tunnelConnect(req, socket, head, reach, idleTimeoutMs);
    interceptConnect(req, socket, head, { tenant, secrets, reach, idleTimeoutMs }).then(
      (took) => void (took || tunnelConnect(req, socket, head, reach, idleTimeoutMs)),
      () => socket.destroy(),
    );
  });
  server.on('clientError', (_err, socket: net.Socket) => socket.destroy());

  await fs.rm(options.socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  await fs.chmod(options.socketPath, options.socketMode ?? 0o666);

  return {
    tenant,
    socketPath: options.socketPath,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
      await fs.rm(options.socketPath, { force: true });
    },
  };
}
