/**
 * The processes of the `egress` benchmark, one role each, so the path under test has the hops a
 * sandbox's download has and the bench process only plays the client:
 *
 *   node egress-path.js origin                    an HTTP origin on 127.0.0.1: /big?n=BYTES, /small
 *   node egress-path.js proxy SOCKET ORIGIN_PORT  the executor's egress channel on SOCKET for tenant
 *                                                 "bench", whose policy allows origin.test:ORIGIN_PORT
 *                                                 (pinned to 127.0.0.1)
 *   node egress-path.js relay SOCKET              the sandbox agent's relay: 127.0.0.1:PORT → SOCKET
 *
 * Each prints one line when ready: the port it listens on (origin, relay) or "ready" (proxy).
 */
import * as http from 'node:http';
import type * as net from 'node:net';
import { productModule } from '../lib/product';

const [role, a, b] = process.argv.slice(2);

async function origin(): Promise<void> {
  const chunk = Buffer.alloc(1024 * 1024, 'x');
  const server = http.createServer((req, res) => {
    const big = /^\/big\?n=(\d+)$/.exec(req.url ?? '');
    if (!big) return void res.end('ok\n');
    let left = Number(big[1]);
    res.writeHead(200, { 'content-length': String(left) });
    const pump = () => {
      while (left > 0) {
        const part = left >= chunk.length ? chunk : chunk.subarray(0, left);
        left -= part.length;
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

const run = role === 'origin' ? origin() : role === 'proxy' ? proxy(a!, b!) : role === 'relay' ? relay(a!) : Promise.reject(new Error(`unknown role ${role}`));
run.catch((err: unknown) => {
  process.stderr.write(`egress-path ${role}: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
