/** http_request's input schema, and its checks that need the configured limits. */
import type { z } from 'zod';
import type { Zod } from '../zod';
import { ToolError } from '../../protocol/errors';
import type { ToolLimits } from '../../limits';
import { TOOLGATE_VERSION } from '../../version';
import { checkUrl } from './exchange';

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export const httpRequestInput = (z: Zod) =>
  z.object({
    url: z.string().min(1).describe('Absolute http:// or https:// URL'),
    method: z.string().regex(TOKEN, 'must be an HTTP method token such as GET or POST').optional().describe('HTTP method (default GET)'),
    headers: z
      .record(z.string(), z.string())
      .optional()
      .describe('Request headers, name → value; a value may hold {{secret:NAME}}, sent as that secret only to the hosts it is bound to'),
    body: z.string().optional().describe('Request body as UTF-8 text'),
    body_base64: z.string().optional().describe('Request body as base64, for binary data (instead of body)'),
    timeout_ms: z.number().int().positive().optional().describe('Timeout for the whole call, redirects and body included'),
    max_bytes: z.number().int().positive().optional().describe('Most response body bytes to return; the rest is cut off and `truncated` is true'),
    follow_redirects: z.boolean().optional().describe('Follow redirects (default true), each hop checked by the address guard'),
  });
export type HttpRequestArgs = z.output<ReturnType<typeof httpRequestInput>>;

export interface PreparedRequest {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body: Buffer | undefined;
  timeoutMs: number;
  maxBytes: number;
}

/** fetch's rule: these names are upper-cased, every other method is sent as written. */
const NORMALIZED = new Set(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT']);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function upTo(value: number | undefined, fallback: number, max: number, field: string, env: string): number {
  if (value === undefined) return Math.min(fallback, max);
  if (value > max) throw new ToolError(`${field} must be at most ${max} (the server's limit, ${env}); got ${value}`);
  return value;
}

export function prepareRequest(args: HttpRequestArgs, limits: ToolLimits): PreparedRequest {
  let url: URL;
  try {
    url = new URL(args.url);
  } catch {
    throw new ToolError(`url is not a valid absolute URL: ${args.url}`);
  }
  checkUrl(url);
  let method = args.method ?? 'GET';
  if (NORMALIZED.has(method.toUpperCase())) method = method.toUpperCase();
  if (method.toUpperCase() === 'CONNECT') throw new ToolError('The CONNECT method is not supported');

  if (args.body !== undefined && args.body_base64 !== undefined) throw new ToolError('Give body or body_base64, not both');
  let body: Buffer | undefined;
  if (args.body !== undefined) body = Buffer.from(args.body, 'utf8');
  if (args.body_base64 !== undefined) {
    const compact = args.body_base64.replace(/\s+/g, '');
    if (compact.length % 4 !== 0 || !BASE64.test(compact)) throw new ToolError('body_base64 is not valid base64');
    body = Buffer.from(compact, 'base64');
  }
  // The request body shares write_file's cap: both are data a caller pushes through the server.
  if (body && body.length > limits.maxWriteBytes) {
    throw new ToolError(`The request body is ${body.length} bytes; the limit is ${limits.maxWriteBytes} (TOOLGATE_MAX_WRITE_BYTES)`);
  }

  const headers: Record<string, string> = Object.fromEntries(Object.entries(args.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
  headers['user-agent'] ??= `toolgate/${TOOLGATE_VERSION}`;

  return {
    url,
    method,
    headers,
    body,
    timeoutMs: upTo(args.timeout_ms, limits.httpTimeoutMs, limits.httpMaxTimeoutMs, 'timeout_ms', 'TOOLGATE_HTTP_MAX_TIMEOUT_MS'),
    maxBytes: upTo(args.max_bytes, limits.httpMaxBytes, limits.httpMaxBytes, 'max_bytes', 'TOOLGATE_HTTP_MAX_BYTES'),
  };
}
