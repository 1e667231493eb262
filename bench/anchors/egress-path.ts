/**
 * The processes of the `egress` benchmark, one role each, so the path under test has the hops a
 * sandbox's download has and the bench process only plays the client:
 *
 *   node egress-path.js origin                    an HTTP origin on 127.0.0.1: /big?n=BYTES[&rate=BYTES_PER_S], /small
 *   node egress-path.js proxy SOCKET ORIGIN_PORT  the executor's egress channel on SOCKET for tenant
 *                                                 "bench", whose policy allows origin.test:ORIGIN_PORT
 *                                                 (pinned to 127.0.0.1)
 *   node egress-path.js relay SOCKET              the sandbox agent's relay: 127.0.0.1:PORT → SOCKET
 *   node egress-path.js floor-proxy SOCKET        the floor's proxy: bare Node, no toolgate code
 *   node egress-path.js floor-relay SOCKET        the floor's relay: bare Node, no toolgate code
 *   node egress-path.js one-hop PORT              one bare Node process piping 127.0.0.1:ITS_PORT → PORT:
 *                                                 the least any proxy in the path costs (no relay, no socket)
 *
 * The floor is the same topology (its own relay process, a Unix socket, its own proxy process)
 * built from bare parts: a `net` server piping each connection to the socket, and an `http`
 * server that pipes an absolute-URI request into `http.request` and its response back, and a
 * CONNECT into a `net` connection. No policy, no resolution, no accounting, no header filtering:
 * what any implementation of this topology pays on this machine, whatever it checks.
 *
 * Each prints one line when ready: the port it listens on (origin, relays) or "ready" (proxies).
 */
import * as http from 'node:http';
import * as net from 'node:net';
import { productModule } from '../lib/product';

const [role, a, b] = process.argv.slice(2);

async function origin(): Promise<void> {
  const chunk = Buffer.alloc(1024 * 1024, 'x');
  const server = http.createServer((req, res) => {
    const big = /^\/big\?n=(\d+)(?:&rate=(\d+))?$/.exec(req.url ?? '');
    if (!big) return void res.end('ok\n');
    let left = Number(big[1]);
    // A rate paces the chunks as a real upstream's link would (loopback is far faster than any).
    const rate = big[2] === undefined ? 0 : Number(big[2]);
    const started = Date.now();
    let sent = 0;
    res.writeHead(200, { 'content-length': String(left) });
    const pump = (): void => {
      while (left > 0) {
        const due = rate > 0 ? started + (sent / rate) * 1000 - Date.now() : 0;
        if (due > 0) return void setTimeout(pump, due);
        const part = left >= chunk.length ? chunk : chunk.subarray(0, left);
        left -= part.length;
        sent += part.length;
        if (!res.write(part)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`);
}

async function proxy(socketPath: string, originPort: string): Promise<void> {
  const egress = productModule<typeof import('../../executor/egress/index')>('executor/egress/index');
  const policy = egress.createEgressPolicy({ allow: `origin.test:${originPort}` });
  await egress.openEgressChannel({
    tenant: 'bench',
    socketPath,
    policies: async () => ({ policy, source: 'tenant' }),
    resolver: egress.createEgressResolver({ pins: new Map([['origin.test', '127.0.0.1']]) }),
    accounting: egress.createEgressAccounting({ limits: { bytesPerDay: 0, maxConnections: 1024 } }),
  });
  process.stdout.write('ready\n');
}

async function relay(socketPath: string): Promise<void> {
  const { startEgressRelay } = productModule<typeof import('../../executor/agent/egress-relay')>('executor/agent/egress-relay');
  const started = await startEgressRelay(socketPath, 0);
  process.stdout.write(`${started.port}\n`);
}

async function floorProxy(socketPath: string): Promise<void> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '');
    const out = http.request(
      { host: '127.0.0.1', port: Number(url.port) || 80, method: req.method, path: url.pathname + url.search, headers: req.headers, agent: false },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    const port = Number(/:(\d+)$/.exec(req.url ?? '')?.[1]);
    const upstream = net.connect({ host: '127.0.0.1', port }, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      client.pipe(upstream).pipe(client);
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  process.stdout.write('ready\n');
}

/** A bare Node relay: 127.0.0.1:ITS_PORT piped byte for byte to `to` (the floor's relay, and the one bare hop). */
async function bareRelay(to: net.NetConnectOpts): Promise<void> {
  const server = net.createServer((client) => {
    const upstream = net.connect(to);
    client.pipe(upstream).pipe(client);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`);
}

const roles: Record<string, () => Promise<void>> = {
  origin,
  proxy: () => proxy(a!, b!),
  relay: () => relay(a!),
  'floor-proxy': () => floorProxy(a!),
  'floor-relay': () => bareRelay({ path: a! }),
  'one-hop': () => bareRelay({ host: '127.0.0.1', port: Number(a) }),
};
// A SIGTERM exits normally, so a --cpu-prof run (TOOLGATE_BENCH_NODE_FLAGS) writes its profile.
process.once('SIGTERM', () => process.exit(0));
const run = roles[role ?? '']?.() ?? Promise.reject(new Error(`unknown role ${role}`));
run.catch((err: unknown) => {
  process.stderr.write(`egress-path ${role}: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
