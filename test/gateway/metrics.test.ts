/**
 * GET /metrics in the Prometheus text format: requests by outcome, JSON-RPC replies by outcome,
 * tool-call duration by tool, queue depth and live sandboxes (the last three from bus events).
 */
import type { ToolResult } from '../../shared/tools/tool';
import { json, startTestGateway, TestGateway } from './harness';

/** The value of one sample, or undefined when the series is absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1]!, x[2]!]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) return Number(m[3]);
  }
  return undefined;
}

const scrape = async (gw: TestGateway) => {
  const res = await fetch(new URL('/metrics', gw.url));
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
};

describe('metrics', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(async () => {
    await gw?.close();
  });

  test('requests and replies by outcome, tool-call duration by tool, live sandboxes', async () => {
    await json(await gw.post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'write_file', arguments: { path: 'm.txt', content: 'x' } } }));
    await json(await gw.post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'absent' } } }));
    await json(
      await gw.post(
        { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'run_command', arguments: { command: 'true' } } },
        { token: gw.token({ permissions: ['file:read'] }) },
      ),
    );
    await gw.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    await gw.post({ jsonrpc: '2.0', id: 4, method: 'ping' }, { token: 'nope' });
    await gw.post({ jsonrpc: '2.0', id: 5, method: 'ping' }, { headers: { 'Content-Type': 'text/plain' } });
    await fetch(gw.url);
    await gw.post(undefined, { raw: '{' });

    const text = await scrape(gw);
    expect(sample(text, 'toolgate_http_requests_total', { outcome: 'ok' })).toBe(4);
    expect(sample(text, 'toolgate_http_requests_total', { outcome: 'accepted' })).toBe(1);
    expect(sample(text, 'toolgate_http_requests_total', { outcome: 'unauthenticated' })).toBe(1);
    expect(sample(text, 'toolgate_http_requests_total', { outcome: 'unsupported_media_type' })).toBe(1);
    expect(sample(text, 'toolgate_http_requests_total', { outcome: 'method_not_allowed' })).toBe(1);
    expect(sample(text, 'toolgate_rpc_responses_total', { outcome: 'ok' })).toBe(2);
    expect(sample(text, 'toolgate_rpc_responses_total', { outcome: 'permission_denied' })).toBe(1);
    expect(sample(text, 'toolgate_rpc_responses_total', { outcome: 'parse_error' })).toBe(1);
    expect(sample(text, 'toolgate_tool_call_duration_seconds_count', { tool: 'write_file', outcome: 'ok' })).toBe(1);
    expect(sample(text, 'toolgate_tool_call_duration_seconds_count', { tool: 'read_file', outcome: 'tool_error' })).toBe(1);
    expect(sample(text, 'toolgate_tool_call_duration_seconds_count', { tool: 'run_command' })).toBeUndefined();
    expect(sample(text, 'toolgate_live_sandboxes', { backend: 'none' })).toBe(1);
    expect(sample(text, 'toolgate_queue_depth')).toBe(0);
    // No identities in labels: the metrics are not a tenant list.
    expect(text).not.toContain('alice');
  });

  test('/metrics and the health endpoints need no token and are not counted as requests', async () => {
    const before = sample(await scrape(gw), 'toolgate_http_requests_total', { outcome: 'ok' });
    await fetch(new URL('/healthz', gw.url));
    await fetch(new URL('/readyz', gw.url));
    expect(sample(await scrape(gw), 'toolgate_http_requests_total', { outcome: 'ok' })).toBe(before);
  });
});

describe('queue depth and sandbox gauges follow the bus', () => {
  let gw: TestGateway;
  const held: Array<() => void> = [];
  beforeAll(async () => {
    gw = await startTestGateway({
      env: { TOOLGATE_EXECUTOR_CONCURRENCY: '1' },
      handler: () => new Promise<ToolResult>((resolve) => held.push(() => resolve({ content: [{ type: 'text', text: 'ok' }] }))),
    });
  });
  afterAll(async () => {
    held.forEach((f) => f());
    await gw?.close();
  });

  test('calls waiting for the one executor slot show as queue depth, then drain', async () => {
    const calls = ['q1', 'q2', 'q3'].map((id) =>
      gw.post({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'x' } } }, { token: gw.token({ id }) }),
    );
    while (gw.events.filter((e) => e.type === 'job.enqueued').length < 3 || held.length < 1) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setImmediate(r));
    expect(sample(await scrape(gw), 'toolgate_queue_depth')).toBe(2);
    while (held.length > 0 || gw.events.filter((e) => e.type === 'job.completed').length < 3) {
      held.splice(0).forEach((f) => f());
      await new Promise((r) => setTimeout(r, 5));
    }
    await Promise.all(calls);
    expect(sample(await scrape(gw), 'toolgate_queue_depth')).toBe(0);
  });

  test('sandbox.started / sandbox.stopped move the live sandbox gauge per backend', async () => {
    gw.bus.publish({ type: 'sandbox.started', tenant: 't1', backend: 'bwrap', at: Date.now(), startMs: 5 });
    gw.bus.publish({ type: 'sandbox.started', tenant: 't2', backend: 'bwrap', at: Date.now(), startMs: 5 });
    gw.bus.publish({ type: 'sandbox.started', tenant: 't2', backend: 'bwrap', at: Date.now(), startMs: 5 }); // a duplicate is not a second sandbox
    await new Promise((r) => setImmediate(r));
    expect(sample(await scrape(gw), 'toolgate_live_sandboxes', { backend: 'bwrap' })).toBe(2);
    gw.bus.publish({ type: 'sandbox.stopped', tenant: 't1', backend: 'bwrap', at: Date.now(), reason: 'idle' });
    gw.bus.publish({ type: 'sandbox.stopped', tenant: 't2', backend: 'bwrap', at: Date.now(), reason: 'idle' });
    await new Promise((r) => setImmediate(r));
    expect(sample(await scrape(gw), 'toolgate_live_sandboxes', { backend: 'bwrap' })).toBe(0);
  });

  test('egress.denied / egress.closed count connections by result and bytes by direction, never a tenant or host', async () => {
    const at = Date.now();
    gw.bus.publish({ type: 'egress.denied', tenant: 't1', host: 'evil.test', port: 443, reason: "not in this tenant's policy", at });
    gw.bus.publish({
      type: 'egress.denied',
      tenant: 't1',
      host: 'a.test',
      port: 443,
      reason: 'limit: 64 connections at once for this tenant',
      limited: true,
      at,
    });
    gw.bus.publish({
      type: 'egress.closed',
      tenant: 't1',
      host: 'a.test',
      port: 443,
      address: '203.0.113.7',
      bytesIn: 5000,
      bytesOut: 700,
      durationMs: 12,
      at,
    });
    gw.bus.publish({ type: 'egress.closed', tenant: 't2', host: 'b.test', port: 80, address: '203.0.113.8', bytesIn: 1000, bytesOut: 300, durationMs: 3, at });
    await new Promise((r) => setImmediate(r));
    const text = await scrape(gw);
    expect(sample(text, 'toolgate_egress_connections_total', { result: 'denied' })).toBe(1);
    expect(sample(text, 'toolgate_egress_connections_total', { result: 'limited' })).toBe(1);
    expect(sample(text, 'toolgate_egress_connections_total', { result: 'allowed' })).toBe(2);
    expect(sample(text, 'toolgate_egress_bytes_total', { direction: 'in' })).toBe(6000);
    expect(sample(text, 'toolgate_egress_bytes_total', { direction: 'out' })).toBe(1000);
    expect(text.split('\n').filter((l) => l.startsWith('toolgate_egress_') && /t1|t2|\.test/.test(l))).toEqual([]);
  });
});

describe("admission gauge: calls waiting for their tenant's share", () => {
  let gw: TestGateway;
  const held: Array<() => void> = [];
  beforeAll(async () => {
    gw = await startTestGateway({
      env: { TOOLGATE_TENANT_CONCURRENCY: '1' },
      handler: () => new Promise<ToolResult>((resolve) => held.push(() => resolve({ content: [{ type: 'text', text: 'ok' }] }))),
    });
  });
  afterAll(async () => {
    held.forEach((f) => f());
    await gw?.close();
  });

  test("a tenant's calls past its share wait at the gateway (not on the bus), then drain in order", async () => {
    const token = gw.token({ id: 'flood' });
    const calls = [1, 2, 3].map((id) =>
      gw.post({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'x' } } }, { token }),
    );
    while (held.length < 1) await new Promise((r) => setTimeout(r, 5));
    let text = await scrape(gw);
    while (sample(text, 'toolgate_admission_waiting') !== 2) {
      await new Promise((r) => setTimeout(r, 5));
      text = await scrape(gw);
    }
    // Only its share reached the bus.
    expect(gw.events.filter((e) => e.type === 'job.enqueued').length).toBe(1);
    while (gw.events.filter((e) => e.type === 'job.completed').length < 3) {
      held.splice(0).forEach((f) => f());
      await new Promise((r) => setTimeout(r, 5));
    }
    await Promise.all(calls);
    expect(sample(await scrape(gw), 'toolgate_admission_waiting')).toBe(0);
  });
});
