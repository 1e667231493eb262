/**
 * Shared by the stack suites: what they need from the machine, free loopback ports, an HTTPS
 * client that trusts one CA, and a loopback HTTP upstream that records what reaches it.
 */
import { execFileSync } from 'node:child_process';
import * as http from 'node:http';
import * as net from 'node:net';
import { Agent, fetch, RequestInit, Response } from 'undici';
import { hasCommand } from '../helpers/availability';

export function succeeds(cmd: string, args: string[]): boolean {
  try {
    execFileSync(cmd, args, { stdio: 'ignore', timeout: 15_000 });
    return true;
  } catch {
    return false;
  }
}

const hasImage = (image: string) => succeeds('docker', ['image', 'inspect', image]);

/** The image a compose variable names: the variable, else the local stand-in, else the public default. */
export function imageFor(variable: string, local: string, fallback: string): string {
  const set = process.env[variable]?.trim();
  if (set) return set;
  return hasImage(local) ? local : fallback;
}

/** Why Docker cannot be used here (with the images named), or undefined. */
export function dockerMissing(images: string[], needCompose = false): string | undefined {
  const setup = 'a Docker engine and the base images: docs/deployment.md';
  if (!hasCommand('docker')) return `needs Docker: ${setup}`;
  if (needCompose && !hasCommand('docker-compose')) return `needs docker-compose (v1): ${setup}`;
  if (!succeeds('docker', ['info', '--format', '{{.ServerVersion}}'])) return `dockerd is not reachable: ${setup}`;
  const missing = images.filter((image) => !hasImage(image));
  if (missing.length > 0) return `images not on this machine: ${missing.join(', ')} (${setup})`;
  return undefined;
}

export { freePort } from '../helpers/ports';

/** fetch over HTTPS trusting exactly `ca` (Caddy's root), nothing else. */
export class TrustingClient {
  readonly agent: Agent;
  constructor(ca: string | Buffer, options: { allowH2?: boolean } = {}) {
    this.agent = new Agent({ connect: { ca }, allowH2: options.allowH2 ?? false });
  }
  fetch(url: string, init: RequestInit = {}): Promise<Response> {
    return fetch(url, { ...init, dispatcher: this.agent });
  }
  close(): Promise<void> {
    return this.agent.close();
  }
}

export interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  bytes: number;
  /** The body arrived whole (false: the connection broke off mid-body). */
  complete: boolean;
}

/** A loopback HTTP server standing in for the gateway: records every request, answers JSON. */
export class StubUpstream {
  readonly seen: Seen[] = [];
  private constructor(
    private readonly server: http.Server,
    readonly port: number,
  ) {}

  static async start(port = 0): Promise<StubUpstream> {
    let stub: StubUpstream | undefined;
    const server = http.createServer((req, res) => {
      const seen: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, bytes: 0, complete: false };
      stub!.seen.push(seen);
      req.on('data', (chunk: Buffer) => (seen.bytes += chunk.length));
      req.on('error', () => undefined);
      req.on('end', () => {
        seen.complete = true;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, result: { upstream: true, bytes: seen.bytes } }));
      });
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    stub = new StubUpstream(server, (server.address() as net.AddressInfo).port);
    return stub;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

export async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A JSON-RPC error body (Caddy's or the gateway's). */
export interface RpcErrorBody {
  jsonrpc: string;
  id: unknown;
  error: { code: number; message: string; data?: Record<string, unknown> };
}
