/**
 * CONNECT to a host that has one of the tenant's secrets: the only connections the egress proxy
 * opens. It answers 200, shows the sandbox a certificate for that host signed by the executor's
 * CA (which the sandbox trusts), reads HTTP/1.1 requests from it, and sends each one over its own
 * checked upstream connection with TLS to the real host, verifying the real certificate (Node's
 * roots plus TOOLGATE_EGRESS_CA_FILE), with placeholders swapped and values redacted on the way
 * back (rewrite.ts). A client that speaks plain HTTP in the tunnel (Node's fetch to an http://
 * URL) is served the same way without TLS on either side, except on port 443, where a secret goes
 * only over TLS. Every request goes to the host the CONNECT named, with that Host, whatever the
 * request says. Any other CONNECT stays an end-to-end tunnel (tunnel.ts).
 */
import * as http from 'node:http';
import { isIP } from 'node:net';
import type * as net from 'node:net';
import * as tls from 'node:tls';
import { addressed, answerRefusal, cleartextTo443, sendUpstream } from '../egress/forward';
import { connectRefusal, parseAuthority } from '../egress/tunnel';
import { Reach, Refusal, shown, Target } from '../egress/upstream';
import { RequestRewrite, requestRewrite } from './rewrite';
import type { ChannelSecrets } from './service';

export interface InterceptOptions {
  tenant: string;
  secrets: ChannelSecrets;
  reach: Reach;
  idleTimeoutMs: number;
}

type Reached = Exclude<Awaited<ReturnType<Reach>>, Refusal>;

/** Answers the CONNECT itself with a refusal; what the client sends meanwhile is read and dropped. */
const refuseConnect = (client: net.Socket, refusal: Refusal, idleTimeoutMs: number) => {
  client.setTimeout(idleTimeoutMs, () => client.destroy());
  client.resume();
  client.end(connectRefusal(refusal));
};

/** Takes the CONNECT when the target has a secret (resolves true); else leaves it to the tunnel (false). */
export async function interceptConnect(req: http.IncomingMessage, client: net.Socket, head: Buffer, options: InterceptOptions): Promise<boolean> {
  // Before the first await: a client reset while it is pending must not be an unhandled error.
  client.on('error', () => undefined);
  const target = parseAuthority(req.url ?? '');
  if (!target) return false;
  const set = await options.secrets.forTarget(options.tenant, target.host, target.port);
  if (!set) return false;
  // The first upstream connection is made now, so a refusal answers the CONNECT as a tunnel's would.
  const first = await options.reach(target);
  if ('line' in first) {
    refuseConnect(client, first, options.idleTimeoutMs);
    return true;
  }
  // Until a request takes it, the first connection (and its lease: one of the tenant's connection
  // slots) goes back as soon as the client goes, whenever that is: during an await below, its
  // 'close' has fired before anything else listened.
  let spare: Reached | undefined = first;
  const release = (why = 'unused') => {
    spare?.upstream.destroy();
    spare?.lease.close(why);
    spare = undefined;
  };
  client.once('close', () => release());
  const gone = () => {
    if (client.destroyed) release();
    return client.destroyed;
  };
  if (gone()) return true;
  // The leaf is ready before the 200: the sandbox sends its ClientHello only after it.
  const secureContext = await options.secrets.serverContext(target.host).catch((err: unknown) => {
    release('no certificate');
    throw err;
  });
  if (gone()) return true;
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
  if (opening.length === 0 || gone()) {
    release();
    client.destroy();
    return true;
  }
  const tlsInside = opening[0] === TLS_HANDSHAKE;
  if (!tlsInside && target.port === 443) {
    release('refused: cleartext to port 443');
    refuseConnect(client, cleartextTo443(target), options.idleTimeoutMs);
    return true;
  }
  client.unshift(opening);
  const inner = tlsInside ? new tls.TLSSocket(client, { isServer: true, secureContext, ALPNProtocols: ['http/1.1'] }) : client;
  inner.on('error', () => inner.destroy());
  inner.setTimeout(options.idleTimeoutMs, () => inner.destroy());
  inner.once('close', () => release());
  const tunnel: Tunnel = {
    target,
    scheme: tlsInside ? 'https' : 'http',
    upstreamTls: options.secrets.upstreamTls,
    upstream,
    rewrite: requestRewrite(set, target, options.secrets.used),
  };
  const server = http.createServer({ requestTimeout: 0 }, (req, res) => void exchange(req, res, tunnel));
  server.on('clientError', (_err, socket: net.Socket) => socket.destroy());
  server.emit('connection', inner);
  // A socket paused to look at its first bytes stays paused until told (the http server does not).
  if (!tlsInside) client.resume();
  return true;
}

const TLS_HANDSHAKE = 0x16;

/** The first bytes the client sends after the 200, the socket left paused; empty when it ends first. */
function firstBytes(client: net.Socket): Promise<Buffer> {
  // Its 'end' or 'close' has been and gone: no listener below would ever hear of it.
  if (client.destroyed || client.readableEnded) return Promise.resolve(Buffer.alloc(0));
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

/** One intercepted CONNECT, as each request in it is sent on. */
interface Tunnel {
  /** The host and port the CONNECT named: every request goes there, whatever it says. */
  target: Target;
  /** How the sandbox spoke in the tunnel, and so how upstream is spoken to: TLS, or in the clear. */
  scheme: 'http' | 'https';
  /** Upstream TLS's verification (ChannelSecrets.upstreamTls); Node's defaults when undefined. */
  upstreamTls: tls.SecureContext | undefined;
  /** The spare first connection, else a new one. */
  upstream(): Promise<Reached | Refusal>;
  rewrite: RequestRewrite;
}

/** One request from the sandbox, sent to the real host the CONNECT named. */
async function exchange(req: http.IncomingMessage, res: http.ServerResponse, { target, scheme, upstreamTls, upstream, rewrite }: Tunnel): Promise<void> {
  // Only the CONNECT's target: a Host or absolute URI naming another would be routed there by
  // whatever shares the address reached (a CDN, a reverse proxy), with the secret swapped in.
  const to = addressed(req.url ?? '', scheme, target);
  if (!to) {
    const line = `toolgate egress: this tunnel goes to ${shown(target)}: send its requests as /path or ${scheme}://${shown(target)}/path`;
    return answerRefusal(res, { status: 400, line });
  }
  const reached = await upstream();
  if ('line' in reached) return answerRefusal(res, reached);
  const { upstream: socket, lease } = reached;
  const connection =
    scheme === 'http'
      ? socket
      : tls.connect({
          socket,
          ...(isIP(target.host) === 0 ? { servername: target.host } : {}),
          host: target.host,
          ALPNProtocols: ['http/1.1'],
          ...(upstreamTls ? { secureContext: upstreamTls } : {}),
        });
  sendUpstream(req, res, { to, socket, connection, lease, rewrite });
}
