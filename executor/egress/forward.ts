/**
 * Forward-proxy HTTP (`GET http://host:port/path`, RFC 9112 absolute form): one upstream
 * connection per request, reached through the channel's checks, with hop-by-hop headers
 * (Proxy-Authorization among them) dropped both ways and the bodies counted as they pass.
 */
import * as http from 'node:http';
import { normalizeTargetHost } from './rules';
import type { RewriteFor } from '../secrets/rewrite';
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

/**
 * Answers one request the sandbox sent to the proxy. `rewriteFor` (secrets hook,
 * executor/secrets/rewrite.ts): for a host that has a tenant's secret, its placeholders are swapped
 * in the request headers and its values redacted from the response.
 */
export async function forwardRequest(req: http.IncomingMessage, res: http.ServerResponse, reach: Reach, rewriteFor?: RewriteFor): Promise<void> {
  const reply = ({ status, line }: Refusal) => {
    res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(line) + 1, connection: 'close' });
    res.end(line + '\n');
  };
  const to = addressed(req.url ?? '', 'http');
  if (!to) {
    reply({ status: 400, line: 'toolgate egress: this is a proxy: send http:// URLs in absolute form, and use CONNECT for https and other TCP' });
    return;
  }
  const { target } = to;
  const reached = await reach(target);
  if ('line' in reached) return reply(reached);
  const { upstream, lease } = reached;
  // Secrets hook: undefined for a host without a secret (then nothing below changes).
  const rewrite = await rewriteFor?.(target);
  if (rewrite && target.port === 443) {
    upstream.destroy();
    lease.close('refused: cleartext to port 443');
    return reply(cleartextTo443(target));
  }
  const cut = () => {
    upstream.destroy();
    res.destroy();
  };
  const out = http.request({
    method: req.method,
    path: to.path,
    // RFC 9112 §3.2.2: Host is the target URI's, never what the client wrote beside it.
    headers: [...(rewrite ? rewrite.request(endToEnd(req.rawHeaders, 'host')) : endToEnd(req.rawHeaders, 'host')), 'host', to.host, 'connection', 'close'],
    setHost: false,
    createConnection: () => upstream,
  });
  out.on('response', (up) => {
    const headers = endToEnd(up.rawHeaders);
    const count = (n: number) => lease.add('in', n);
    if (rewrite) return rewrite.respond(up, res, { method: req.method ?? 'GET', headers, count, cut, refuse: reply });
    // A host without a secret: its bytes pass as they are (a compressed body stays compressed).
    res.writeHead(up.statusCode ?? 502, up.statusMessage, headers);
    relay(up, res, count, cut);
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
}
