/**
 * Forward-proxy HTTP (`GET http://host:port/path`, RFC 9112 absolute form): one upstream
 * connection per request, reached through the channel's checks, with hop-by-hop headers
 * (Proxy-Authorization among them) dropped both ways and the bodies counted as they pass.
 */
import * as http from 'node:http';
import type * as net from 'node:net';
import type { EgressLease } from './accounting';
import { normalizeTargetHost } from './rules';
import type { RequestRewrite, RewriteFor } from '../secrets/rewrite';
import { Reach, Refusal, relay, shown, Target } from './upstream';

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

/** Headers to pass on: without hop-by-hop ones, nor those the Connection header names. */
export function endToEnd(raw: readonly string[], ...also: string[]): string[] {
  const named = new Set([...HOP_BY_HOP, ...also]);
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]?.toLowerCase() === 'connection') (raw[i + 1] ?? '').split(',').forEach((h) => named.add(h.trim().toLowerCase()));
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (!named.has((raw[i] ?? '').toLowerCase())) out.push(raw[i] ?? '', raw[i + 1] ?? '');
  return out;
}

/** Where one proxied request goes, and how its request line and Host read there. */
export interface Addressed {
  target: Target;
  /** The request-target upstream gets: path and query (origin form). */
  path: string;
  /** The Host upstream gets: the target's authority, never what the client wrote beside it. */
  host: string;
}

const DEFAULT_PORT = { http: 80, https: 443 } as const;

/**
 * Reads a request's target for `scheme` (RFC 9112 §3.2). Without `within` (forward proxying): the
 * absolute form, its authority the target. Inside a CONNECT to `within`: the origin form, or the
 * absolute form naming exactly that scheme and authority, so a request in a tunnel cannot name
 * another host for whatever routes by Host or URI at the address reached. Undefined otherwise.
 */
export function addressed(requestTarget: string, scheme: keyof typeof DEFAULT_PORT, within?: Target): Addressed | undefined {
  if (within) {
    const host = new URL(`${scheme}://${shown(within)}`).host;
    if (requestTarget.startsWith('/')) return { target: within, path: requestTarget, host };
    const named = addressed(requestTarget, scheme);
    const same = named?.target.host === within.host && named.target.port === within.port;
    return same ? { target: within, path: named.path, host } : undefined;
  }
  let url: URL;
  try {
    url = new URL(requestTarget);
  } catch {
    return undefined;
  }
  const host = url.protocol === `${scheme}:` ? normalizeTargetHost(url.hostname) : undefined;
  if (host === undefined) return undefined;
  return { target: { host, port: Number(url.port) || DEFAULT_PORT[scheme] }, path: url.pathname + url.search, host: url.host };
}

/**
 * Port 443 is TLS's: a secret goes there only inside TLS, so a request in the clear to a host
 * with a secret on 443 is refused rather than sent.
 */
export const cleartextTo443 = (target: Target): Refusal => ({
  status: 403,
  line: `toolgate egress: refused ${shown(target)}: a secret is sent to port 443 only over TLS`,
});

/** Answers a proxied request with a refusal's one line; a response already under way is cut instead. */
export function answerRefusal(res: http.ServerResponse, { status, line }: Refusal): void {
  if (res.headersSent) return void res.destroy();
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(line) + 1, connection: 'close' });
  res.end(line + '\n');
}

/** One request on its way to the host it is addressed to, over a connection already checked and leased. */
export interface UpstreamLeg {
  to: Addressed;
  /** The checked upstream socket: its bytes are what the lease counts. */
  socket: net.Socket;
  /** What HTTP is spoken over: `socket` itself, or TLS on it. */
  connection: net.Socket;
  lease: EgressLease;
  /** The secrets hook for a host that has one of the tenant's secrets; its bytes pass as they are without. */
  rewrite?: RequestRewrite | undefined;
}

/**
 * Sends `req` on over the leg's connection (path and Host from `to`, end-to-end headers only,
 * with the secrets' rewrite when there is one) and answers `res` with what comes back, counting
 * both directions against the lease. The forward path and the intercepting one
 * (secrets/intercept.ts) share it.
 */
export function sendUpstream(req: http.IncomingMessage, res: http.ServerResponse, { to, socket, connection, lease, rewrite }: UpstreamLeg): void {
  const closeLease = (error?: string) => lease.close(error, { in: socket.bytesRead, out: socket.bytesWritten });
  const cut = () => {
    connection.destroy();
    res.destroy();
  };
  const headers = endToEnd(req.rawHeaders, 'host');
  const out = http.request({
    method: req.method,
    path: to.path,
    // RFC 9112 §3.2.2: Host is the target URI's, never what the client wrote beside it.
    headers: [...(rewrite ? rewrite.request(headers) : headers), 'host', to.host, 'connection', 'close'],
    setHost: false,
    createConnection: () => connection,
  });
  out.on('response', (up) => {
    const answered = endToEnd(up.rawHeaders);
    const count = (n: number) => lease.add('in', n);
    if (rewrite)
      return rewrite.respond(up, res, { method: req.method ?? 'GET', headers: answered, count, cut, refuse: (refusal) => answerRefusal(res, refusal) });
    // A host without a secret: its bytes pass as they are (a compressed body stays compressed).
    res.writeHead(up.statusCode ?? 502, up.statusMessage, answered);
    relay(up, res, count, cut);
  });
  out.on('error', (err: NodeJS.ErrnoException) => {
    // A certificate the real host cannot prove is the sandbox's answer too: never a silent downgrade.
    answerRefusal(res, { status: 502, line: `toolgate egress: ${shown(to.target)} failed (${err.code ?? err.message})` });
    closeLease(err.code ?? err.message);
  });
  res.on('close', () => {
    connection.destroy();
    closeLease(res.writableFinished ? undefined : 'ended early');
  });
  relay(req, out, (n) => lease.add('out', n), cut);
}

/**
 * Answers one request the sandbox sent to the proxy. `rewriteFor` (secrets hook,
 * executor/secrets/rewrite.ts): for a host that has a tenant's secret, its placeholders are swapped
 * in the request headers and its values redacted from the response.
 */
export async function forwardRequest(req: http.IncomingMessage, res: http.ServerResponse, reach: Reach, rewriteFor?: RewriteFor): Promise<void> {
  const to = addressed(req.url ?? '', 'http');
  if (!to) {
    const line = 'toolgate egress: this is a proxy: send http:// URLs in absolute form, and use CONNECT for https and other TCP';
    return answerRefusal(res, { status: 400, line });
  }
  const reached = await reach(to.target);
  if ('line' in reached) return answerRefusal(res, reached);
  const { upstream, lease } = reached;
  // Secrets hook: undefined for a host without a secret (then nothing below changes).
  const rewrite = await rewriteFor?.(to.target);
  if (rewrite && to.target.port === 443) {
    upstream.destroy();
    lease.close('refused: cleartext to port 443');
    return answerRefusal(res, cleartextTo443(to.target));
  }
  sendUpstream(req, res, { to, socket: upstream, connection: upstream, lease, rewrite });
}
