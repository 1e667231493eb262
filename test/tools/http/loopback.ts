/**
 * Test helpers for http_request: HTTP servers and raw "tripwire" listeners on loopback only,
 * and a runner that calls the tool the way the server does (schema parse, then LocalToolRunner,
 * so a ToolError arrives as an `isError` result).
 */
import * as http from 'node:http';
import * as net from 'node:net';
import { DEFAULT_LIMITS, ToolLimits } from '../../../shared/limits';
import { httpRequest } from '../../../shared/tools/http/http-request';
import { createHttpPolicy, HttpPolicyOptions } from '../../../shared/tools/http/policy';
import { LocalToolRunner } from '../../../shared/tools/local-runner';
import type { AnyTool, ToolResult } from '../../../shared/tools/tool';

export type Loopback = '127.0.0.1' | '::1';

export interface TestServer {
  port: number;
  /** Base URL, e.g. http://127.0.0.1:PORT */
  url: string;
  /** Every request the server received, in order. */
  seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: Buffer }>;
  close(): Promise<void>;
}

export async function httpServer(
  handler: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void,
  host: Loopback = '127.0.0.1',
): Promise<TestServer> {
  const seen: TestServer['seen'] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url: `http://${host === '::1' ? '[::1]' : host}:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A raw TCP listener that only counts: any connection at all means the guard let something through. */
export interface Tripwire {
  port: number;
  connections: number;
  bytes: number;
  close(): Promise<void>;
}

export async function tripwire(host: Loopback): Promise<Tripwire> {
  const sockets = new Set<net.Socket>();
  const wire: Tripwire = { port: 0, connections: 0, bytes: 0, close: async () => undefined };
  const server = net.createServer((socket) => {
    wire.connections += 1;
    sockets.add(socket);
    socket.on('data', (d) => (wire.bytes += d.length));
    socket.on('close', () => sockets.delete(socket));
    socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  wire.port = (server.address() as net.AddressInfo).port;
  wire.close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return wire;
}

/** Whether this machine can listen on ::1 (IPv6 loopback may be disabled). */
export async function ipv6LoopbackAvailable(): Promise<boolean> {
  const server = net.createServer();
  return new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(0, '::1', () => server.close(() => resolve(true)));
  });
}

export interface CallOptions extends HttpPolicyOptions {
  allow?: string[];
  limits?: Partial<ToolLimits>;
  signal?: AbortSignal;
}

/** Calls http_request as the server would; arguments that fail the schema throw here. */
export async function callHttp(args: Record<string, unknown>, options: CallOptions = {}): Promise<ToolResult> {
  const policyOptions: HttpPolicyOptions = options.resolve ? { resolve: options.resolve } : {};
  const runner = new LocalToolRunner({
    trusted: { limits: { ...DEFAULT_LIMITS, ...options.limits }, http: createHttpPolicy(options.allow ?? [], policyOptions) },
    onUnexpectedError: (err) => {
      throw err;
    },
  });
  const parsed = httpRequest.input.parse(args);
  return runner.run(httpRequest as unknown as AnyTool, parsed, undefined, options.signal ?? new AbortController().signal);
}

/** The text of a result's first content block. */
export const textOf = (result: ToolResult): string => {
  const block = result.content[0];
  return block && block.type === 'text' ? block.text : '';
};

export interface HttpOutput {
  status: number;
  statusText?: string;
  headers: Record<string, string | string[]>;
  body: string;
  bodyEncoding: 'utf8' | 'base64';
  truncated: boolean;
  url: string;
  redirects: string[];
}

/** The structured result, checked against the tool's published output schema. */
export function outputOf(result: ToolResult): HttpOutput {
  if (result.isError) throw new Error(`expected a result, got an error: ${textOf(result)}`);
  const schema = httpRequest.output;
  if (!schema) throw new Error('http_request publishes no output schema');
  return schema.parse(result.structuredContent) as HttpOutput;
}
