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
import type { EgressAccounting, EgressLease } from './accounting';
import type { EgressPolicy } from './policy';
import type { PolicyLookup } from './policy-store';
import type { EgressResolver, ResolvedTarget } from './resolver';
import { normalizeTargetHost } from './rules';
import { connectChecked, relay } from './upstream';

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
}

export interface EgressChannel {
  readonly tenant: string;
  readonly socketPath: string;
  /** Stops listening, ends every connection of the channel and removes the socket file. */
  close(): Promise<void>;
}

type Target = { host: string; port: number };
type Refusal = { status: number; line: string };
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

const shown = ({ host, port }: Target) => `${host.includes(':') ? `[${host}]` : host}:${port}`;

/** Headers to pass on: without hop-by-hop ones, nor those the Connection header names. */
function endToEnd(raw: readonly string[]): string[] {
  const named = new Set(HOP_BY_HOP);
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]?.toLowerCase() === 'connection') (raw[i + 1] ?? '').split(',').forEach((h) => named.add(h.trim().toLowerCase()));
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (!named.has((raw[i] ?? '').toLowerCase())) out.push(raw[i] ?? '', raw[i + 1] ?? '');
  return out;
}

function parseAuthority(authority: string): Target | undefined {
  const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(authority);
  const host = m ? normalizeTargetHost(m[1] ?? '') : undefined;
  const port = Number(m?.[2]);
  return host !== undefined && port >= 1 && port <= 65535 ? { host, port } : undefined;
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
  const reach = async (target: Target): Promise<{ upstream: net.Socket; lease: EgressLease } | Refusal> => {
    const addresses = await vet(target);
    if (!Array.isArray(addresses)) return addresses as Refusal;
    const lease = accounting.open(tenant, target.host, target.port);
    if ('refused' in lease) return { status: 403, line: `toolgate egress: refused ${shown(target)}: ${lease.refused}` };
    try {
      const upstream = await connectChecked(addresses, target.port, connectTimeoutMs);
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

  const forward = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const reply = ({ status, line }: Refusal) => {
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(line) + 1, connection: 'close' });
      res.end(line + '\n');
    };
    let url: URL | undefined;
    try {
      url = new URL(req.url ?? '');
    } catch {
      url = undefined;
    }
    const host = url?.protocol === 'http:' ? normalizeTargetHost(url.hostname) : undefined;
    if (!url || host === undefined) {
      reply({ status: 400, line: 'toolgate egress: this is a proxy: send http:// URLs in absolute form, and use CONNECT for https and other TCP' });
      return;
    }
    const target = { host, port: Number(url.port) || 80 };
    const reached = await reach(target);
    if ('line' in reached) return reply(reached);
    const { upstream, lease } = reached;
    const cut = () => {
      upstream.destroy();
      res.destroy();
    };
    const out = http.request({
      method: req.method,
      path: url.pathname + url.search,
      headers: [...endToEnd(req.rawHeaders), 'connection', 'close'],
      setHost: false,
      createConnection: () => upstream,
    });
    out.on('response', (up) => {
      res.writeHead(up.statusCode ?? 502, up.statusMessage, endToEnd(up.rawHeaders));
      relay(up, res, (n) => lease.add('in', n), cut);
    });
    out.on('error', (err: NodeJS.ErrnoException) => {
      if (!res.headersSent) reply({ status: 502, line: `toolgate egress: ${shown(target)} failed (${err.code ?? err.message})` });
      else res.destroy();
      lease.close(err.code ?? err.message, { in: upstream.bytesRead, out: upstream.bytesWritten });
    });
    res.on('close', () => {
      upstream.destroy();
      lease.close(res.writableFinished ? undefined : 'ended early', { in: upstream.bytesRead, out: upstream.bytesWritten });
    });
    relay(req, out, (n) => lease.add('out', n), cut);
  };

  const tunnel = async (req: http.IncomingMessage, client: net.Socket, head: Buffer): Promise<void> => {
    client.on('error', () => undefined);
    const target = parseAuthority(req.url ?? '');
    const answer = (status: number, line: string) =>
      client.end(
        `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(line) + 1}\r\nconnection: close\r\n\r\n${line}\n`,
      );
    if (!target) return void answer(400, 'toolgate egress: CONNECT needs host:port');
    const reached = await reach(target);
    if ('line' in reached) return void answer(reached.status, reached.line);
    const { upstream, lease } = reached;
    let firstError: string | undefined;
    let open = 2;
    const cut = () => {
      client.destroy();
      upstream.destroy();
    };
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      a.on('error', (err: NodeJS.ErrnoException) => (firstError ??= err.code ?? err.message));
      // A graceful close has passed its end on through relay; anything else takes the other side down.
      a.once('close', (hadError) => {
        if (hadError || !a.readableEnded) b.destroy();
        if (--open === 0) lease.close(firstError, { in: upstream.bytesRead, out: upstream.bytesWritten });
      });
    }
    client.setTimeout(idleTimeoutMs, cut);
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) {
      if (!lease.add('out', head.length)) return cut();
      upstream.write(head);
    }
    relay(client, upstream, (n) => lease.add('out', n), cut);
    relay(upstream, client, (n) => lease.add('in', n), cut);
  };

  const server = http.createServer({ requestTimeout: 0 });
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('request', (req, res) => void forward(req, res));
  server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => void tunnel(req, socket, head));
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
