/**
 * Egress test harness: real servers on 127.0.0.1 only (HTTP, TLS with a certificate for
 * secure.test, a TCP echo), channels on Unix sockets in a temporary directory with a file
 * policy store, and Node clients that speak to a channel the way a sandbox's relay will.
 * Names reach loopback through pins (TOOLGATE_EGRESS_RESOLVE) or a fake DNS (`dns`).
 */
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tls from 'node:tls';
import { Registry } from 'prom-client';
import { createEgressAccounting, EgressAccounting, EgressLimits } from '../../executor/egress/accounting';
import type { EgressEvent } from '../../executor/egress/events';
import { createEgressPolicy } from '../../executor/egress/policy';
import { filePolicyStore, policyLookup, EgressPolicyStore } from '../../executor/egress/policy-store';
import { EgressChannel, EgressChannelOptions, openEgressChannel } from '../../executor/egress/proxy';
import { createEgressResolver } from '../../executor/egress/resolver';
import { loadCertificateAuthority } from '../../executor/secrets/ca';

export interface Harness {
  dir: string;
  store: EgressPolicyStore;
  accounting: EgressAccounting;
  events: EgressEvent[];
  registry: Registry;
  /** Moves the accounting clock (days roll over). */
  clock: { now: number };
  channel(tenant: string): Promise<EgressChannel>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  limits?: Partial<EgressLimits>;
  pins?: Record<string, string>;
  /** Fake DNS: name → address; other names fail with ENOTFOUND. */
  dns?: Record<string, string>;
  defaultAllow?: string;
  /** Counts every DNS query, by name. */
  queries?: Map<string, number>;
  /** The secrets hook every channel gets (test/secrets/egress.test.ts). */
  secrets?: EgressChannelOptions['secrets'];
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-egress-'));
  const store = filePolicyStore(path.join(dir, 'data'));
  const events: EgressEvent[] = [];
  const registry = new Registry();
  const clock = { now: Date.UTC(2026, 10, 26, 12) };
  const accounting = createEgressAccounting({ limits: options.limits, registry, onEvent: (e) => events.push(e), now: () => clock.now });
  const dns = options.dns ?? {};
  const resolver = createEgressResolver({
    pins: new Map(Object.entries(options.pins ?? {})),
    lookup: async (host) => {
      options.queries?.set(host, (options.queries.get(host) ?? 0) + 1);
      const address = dns[host];
      if (address === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      return [{ address, family: net.isIP(address) }];
    },
  });
  const policies = policyLookup(store, createEgressPolicy({ allow: options.defaultAllow ?? '' }));
  const channels: EgressChannel[] = [];
  let n = 0;
  return {
    dir,
    store,
    accounting,
    events,
    registry,
    clock,
    async channel(tenant) {
      const channel = await openEgressChannel({
        tenant,
        socketPath: path.join(dir, `egress-${n++}.sock`),
        policies,
        resolver,
        accounting,
        ...(options.secrets ? { secrets: options.secrets } : {}),
      });
      channels.push(channel);
      return channel;
    },
    async close() {
      await Promise.all(channels.map((c) => c.close()));
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

export interface Reply {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** An absolute-URI request through the channel at `socketPath`. */
export function proxyRequest(
  socketPath: string,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; agent?: http.Agent } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: url, method: init.method ?? 'GET', headers: { host: new URL(url).host, ...init.headers }, agent: init.agent });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), headers: res.headers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

export type Tunnel = { status: 200; socket: net.Socket } | { status: number; body: string };

/** CONNECT `authority` through the channel: the open tunnel, or the refusal's status and body. */
export function connectTunnel(socketPath: string, authority: string, headers: Record<string, string> = {}): Promise<Tunnel> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method: 'CONNECT', path: authority, headers, agent: false });
    req.on('connect', (res: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
      if (res.statusCode === 200) {
        if (head.length > 0) socket.unshift(head);
        return resolve({ status: 200, socket });
      }
      const chunks = [head];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      socket.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Everything `socket` sends until it ends. */
export function readAll(socket: net.Socket | tls.TLSSocket): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString()));
    socket.on('close', () => resolve(Buffer.concat(chunks).toString()));
    socket.on('error', reject);
  });
}

export interface Servers {
  http: { port: number; seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: string }> };
  /** A TLS server whose certificate for each name comes from its own CA (`ca`, PEM); the names clients asked for (SNI). */
  tls: { port: number; ca: Buffer; sni: string[] };
  echo: { port: number };
  close(): Promise<void>;
}

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return (server.address() as net.AddressInfo).port;
}

/** HTTP (`/big?n=BYTES` answers that many bytes; anything else echoes the path), TLS and echo servers on 127.0.0.1. */
export async function startServers(dir: string): Promise<Servers> {
  const seen: Servers['http']['seen'] = [];
  const web = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() });
      const big = /^\/big\?n=(\d+)$/.exec(req.url ?? '');
      if (big) res.end(Buffer.alloc(Number(big[1]), 'x'));
      else res.end(`hello ${req.method} ${req.url}`);
    });
  });
  const sockets = new Set<net.Socket>();
  const echo = net.createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s);
    s.pipe(s);
  });
  const ca = await loadCertificateAuthority(path.join(dir, 'secure-ca'), 'test secure CA');
  const sni: string[] = [];
  const secure = tls.createServer(
    {
      SNICallback: (name, cb) => {
        sni.push(name);
        ca.contextFor(name).then((context) => cb(null, context), cb);
      },
    },
    (s) => {
      s.on('error', () => undefined);
      s.once('data', () => s.end('HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nsecret'));
    },
  );
  const result: Servers = {
    http: { port: await listen(web), seen },
    echo: { port: await listen(echo) },
    tls: { port: await listen(secure), ca: Buffer.from(ca.certPem), sni },
    async close() {
      web.closeAllConnections();
      for (const s of sockets) s.destroy();
      await Promise.all([web, echo, secure].filter((s): s is net.Server => s !== undefined).map((s) => new Promise((r) => s.close(r))));
    },
  };
  return result;
}
