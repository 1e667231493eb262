import { structuredResult } from '../result';
import { defineTool } from '../tool';
import { encodeBody } from './body';
import { exchange, type HttpReply } from './exchange';
import { describeFailure } from './failure';
import { guardedAgent } from './guard';
import type { EgressGate } from './policy';
import { ToolError } from '../../protocol/errors';
import { httpRequestInput, prepareRequest } from './request-args';
import { bindRequestSecrets } from './secret-binding';

export const httpRequest = defineTool({
  name: 'http_request',
  title: 'HTTP request',
  description:
    'Send an HTTP or HTTPS request and return the status, headers and body (text, or base64 for binary) with a `truncated` flag. ' +
    'Redirects are followed up to the configured limit unless follow_redirects is false. Loopback, private, link-local, ' +
    'multicast and cloud-metadata addresses are refused unless the operator allows them. Non-2xx statuses are normal results.',
  permission: 'network:http',
  host: 'trusted',
  input: httpRequestInput,
  output: (z) =>
    z.object({
      status: z.number().int(),
      statusText: z.string().optional(),
      headers: z.record(z.string(), z.union([z.string(), z.array(z.string())])),
      body: z.string(),
      bodyEncoding: z.enum(['utf8', 'base64']),
      truncated: z.boolean(),
      url: z.string(),
      redirects: z.array(z.string()),
    }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async run(args, { http, limits, signal, tenant, secrets }) {
    const req = prepareRequest(args, limits);
    let gate: EgressGate | undefined;
    try {
      gate = tenant !== undefined ? await http.egressFor?.(tenant) : undefined;
    } catch {
      throw new ToolError("Refused: this tenant's egress policy could not be read; try again later");
    }
    const bound = await bindRequestSecrets(secrets, tenant, req.url, req.headers);
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), req.timeoutMs);
    const agent = guardedAgent(http, gate);
    let host = req.url.host;
    let reply: HttpReply;
    try {
      reply = await exchange(
        {
          ...req,
          followRedirects: args.follow_redirects ?? true,
          maxRedirects: limits.httpMaxRedirects,
          signal: AbortSignal.any([signal, deadline.signal]),
          onHop: (url) => (host = url.host),
          ...(bound && { headersFor: bound.headersFor, decodes: bound.decodes, readPast: bound.readPast }),
        },
        agent,
      );
    } catch (err) {
      const failure = describeFailure(err, { host, timedOut: deadline.signal.aborted, timeoutMs: req.timeoutMs, cancelled: signal.aborted });
      throw bound ? new ToolError(bound.redactText(failure.message)) : failure;
    } finally {
      clearTimeout(timer);
      // One agent per call: no connection outlives it or is shared with another caller.
      agent.destroy().catch(() => undefined);
    }

    if (bound) reply = bound.redact(reply, req.maxBytes);
    const header = (name: string) => {
      const v = reply.headers[name];
      return Array.isArray(v) ? v.join(', ') : v;
    };
    const { body, bodyEncoding } = encodeBody(reply.bytes, header('content-type'), header('content-encoding'), reply.truncated);
    const value: Record<string, unknown> = {
      status: reply.status,
      ...(reply.statusText !== undefined && { statusText: reply.statusText }),
      headers: reply.headers,
      body,
      bodyEncoding,
      truncated: reply.truncated,
      url: reply.url,
      redirects: reply.redirects,
    };
    return structuredResult(value, summary(req.method, reply, body, bodyEncoding));
  },
});

function summary(method: string, reply: HttpReply, body: string, encoding: 'utf8' | 'base64'): string {
  const lines = [`HTTP ${reply.status}${reply.statusText ? ` ${reply.statusText}` : ''} — ${method} ${reply.url}`];
  if (reply.redirects.length > 0) lines.push(`after ${reply.redirects.length} redirect(s)`);
  for (const [name, value] of Object.entries(reply.headers)) {
    for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`);
  }
  const size = `${reply.bytes.length} bytes${reply.truncated ? ', truncated at the byte limit' : ''}`;
  lines.push('', encoding === 'base64' ? `[body: ${size}, base64]` : `[body: ${size}]`, body);
  return lines.join('\n');
}
