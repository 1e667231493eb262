/**
 * CONNECT to a host that has one of the tenant's secrets: the only connections the egress proxy
 * opens. It answers 200, shows the sandbox a certificate for that host signed by the executor's
 * CA (which the sandbox trusts), reads HTTP/1.1 requests from it, and sends each one over its own
 * checked upstream connection with TLS to the real host, verifying the real certificate (Node's
 * roots plus TOOLGATE_EGRESS_CA_FILE), with placeholders swapped and values redacted on the way
 * back (rewrite.ts). A client that speaks plain HTTP in the tunnel (Node's fetch to an http://
 * URL) is served the same way without TLS on either side. Any other CONNECT stays an end-to-end
 * tunnel (tunnel.ts).
 */
import * as http from 'node:http';
import { isIP } from 'node:net';
import type * as net from 'node:net';
import * as tls from 'node:tls';
import { endToEnd } from '../egress/forward';
import { parseAuthority } from '../egress/tunnel';
import { Reach, Refusal, relay, shown, Target } from '../egress/upstream';
import { requestRewrite } from './rewrite';
import type { ChannelSecrets } from './service';

export interface InterceptOptions {
  tenant: string;
  secrets: ChannelSecrets;
  reach: Reach;
  idleTimeoutMs: number;
}

type Reached = Exclude<Awaited<ReturnType<Reach>>, Refusal>;

const plain = (res: http.ServerResponse, { status, line }: Refusal) => {
  if (res.headersSent) return void res.destroy();
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(line) + 1, connection: 'close' });
  res.end(line + '\n');
};

/** Takes the CONNECT when the target has a secret (resolves true); else leaves it to the tunnel (false). */
export async function interceptConnect(req: http.IncomingMessage, client: net.Socket, head: Buffer, options: InterceptOptions): Promise<boolean> {
  const target = parseAuthority(req.url ?? '');
  if (!target) return false;
  const set = await options.secrets.forTarget(options.tenant, target.host, target.port);
  if (!set) return false;
  client.on('error', () => undefined);
  // The first upstream connection is made now, so a refusal answers the CONNECT as a tunnel's would.
  const first = await options.reach(target);
  if ('line' in first) {
    client.end(
      `HTTP/1.1 ${first.status} ${http.STATUS_CODES[first.status]}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(first.line) + 1}\r\nconnection: close\r\n\r\n${first.line}\n`,
    );
    return true;
  }
  // The leaf is ready before the 200: the sandbox sends its ClientHello only after it.
  const secureContext = await options.secrets.serverContext(target.host).catch((err: unknown) => {
    first.upstream.destroy();
    first.lease.close('no certificate');
    throw err;
  });
  let spare: Reached | undefined = first;
  const upstream = async (): Promise<Reached | Refusal> => {
    const taken = spare;
    spare = undefined;
    return taken ?? options.reach(target);
  };
  client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  // Node's fetch through a proxy (NODE_USE_ENV_PROXY) tunnels plain http:// too: a TLS handshake
  // starts with 0x16, anything else is HTTP/1.1 in the clear, sent on to the host in the clear.
  const idle = () => client.destroy();
  client.setTimeout(options.idleTimeoutMs, idle);
  const opening = head.length > 0 ? head : await firstBytes(client);
  client.setTimeout(0);
  client.off('timeout', idle);
  if (opening.length === 0) {
    spare = undefined;
    first.upstream.destroy();
    first.lease.close('unused');
    client.destroy();
    return true;
  }
  client.unshift(opening);
  const tlsInside = opening[0] === TLS_HANDSHAKE;
  const inner = tlsInside ? new tls.TLSSocket(client, { isServer: true, secureContext, ALPNProtocols: ['http/1.1'] }) : client;
  inner.on('error', () => inner.destroy());
  inner.setTimeout(options.idleTimeoutMs, () => inner.destroy());
  inner.once('close', () => {
    spare?.upstream.destroy();
    spare?.lease.close('unused');
    spare = undefined;
  });
  const rewrite = requestRewrite(set, target, options.secrets.used);
  const upstreamCa = tlsInside ? options.secrets.upstreamCa : undefined;
  const server = http.createServer({ requestTimeout: 0 }, (req, res) => void exchange(req, res, target, upstream, rewrite, upstreamCa));
  server.on('clientError', (_err, socket: net.Socket) => socket.destroy());
  server.emit('connection', inner);
  // A socket paused to look at its first bytes stays paused until told (the http server does not).
  if (!tlsInside) client.resume();
  return true;
}

const TLS_HANDSHAKE = 0x16;

/** The first bytes the client sends after the 200, the socket left paused; empty when it ends first. */
function firstBytes(client: net.Socket): Promise<Buffer> {
  return new Promise((resolve) => {
    const settle = (chunk: Buffer) => {
      client.off('data', settle);
      client.off('end', ended);
      client.off('close', ended);
      client.pause();
      resolve(chunk);
    };
    const ended = () => settle(Buffer.alloc(0));
    client.on('data', settle);
    client.once('end', ended);
    client.once('close', ended);
  });
}

/**
 * One request from the sandbox, sent to the real host: over TLS when `extraCa` is given (the
 * sandbox spoke TLS), in the clear otherwise.
 */
async function exchange(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  target: Target,
  upstream: () => Promise<Reached | Refusal>,
  rewrite: ReturnType<typeof requestRewrite>,
  extraCa: readonly string[] | undefined,
): Promise<void> {
  const reached = await upstream();
  if ('line' in reached) return plain(res, reached);
  const { upstream: socket, lease } = reached;
  const closeLease = (error?: string) => lease.close(error, { in: socket.bytesRead, out: socket.bytesWritten });
  const secure = !extraCa
    ? socket
    : tls.connect({
        socket,
        ...(isIP(target.host) === 0 ? { servername: target.host } : {}),
        host: target.host,
        ALPNProtocols: ['http/1.1'],
        ...(extraCa.length > 0 ? { ca: [...tls.rootCertificates, ...extraCa] } : {}),
      });
  const cut = () => {
    secure.destroy();
    res.destroy();
  };
  const out = http.request({
    method: req.method,
    path: req.url,
    headers: [...rewrite.request(endToEnd(req.rawHeaders)), 'connection', 'close'],
    setHost: false,
    createConnection: () => secure,
  });
  out.on('response', (up) => {
    const pass = { method: req.method ?? 'GET', headers: endToEnd(up.rawHeaders), count: (n: number) => lease.add('in', n), cut };
    rewrite.respond(up, res, { ...pass, refuse: (refusal: Refusal) => plain(res, refusal) });
  });
  out.on('error', (err: NodeJS.ErrnoException) => {
    // A certificate the real host cannot prove is the sandbox's answer too: never a silent downgrade.
    plain(res, { status: 502, line: `toolgate egress: ${shown(target)} failed (${err.code ?? err.message})` });
    closeLease(err.code ?? err.message);
  });
  res.on('close', () => {
    secure.destroy();
    closeLease(res.writableFinished ? undefined : 'ended early');
  });
  relay(req, out, (n) => lease.add('out', n), cut);
}
