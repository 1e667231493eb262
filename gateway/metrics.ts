/**
 * What GET /metrics shows (Prometheus text format, prom-client). The gateway counts its own HTTP
 * requests and JSON-RPC replies; tool-call durations, queue depth and live sandboxes come from
 * the bus's events, so they describe the work wherever it ran (with BullMQ: every executor).
 * Labels are bounded sets (outcomes, tool names, backends): never identities, which are unbounded
 * and would turn the metrics into a list of tenants.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { BusEvents } from '../shared/bus/bus';
import type { BusEvent } from '../shared/bus/events';
import { ErrorCode } from '../shared/protocol/errors';
import type { JsonRpcResponse } from '../shared/protocol/jsonrpc';

/** What one HTTP request to the JSON-RPC endpoint came to. */
export type RequestOutcome =
  | 'ok'
  | 'accepted'
  | 'bad_request'
  | 'unauthenticated'
  | 'method_not_allowed'
  | 'not_found'
  | 'too_large'
  | 'unsupported_media_type'
  | 'client_gone'
  | 'internal_error';

const STATUS_OUTCOMES: Readonly<Record<number, RequestOutcome>> = {
  200: 'ok',
  202: 'accepted',
  400: 'bad_request',
  401: 'unauthenticated',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'too_large',
  415: 'unsupported_media_type',
  499: 'client_gone',
};
export const outcomeOfStatus = (status: number): RequestOutcome => STATUS_OUTCOMES[status] ?? 'internal_error';

/** ErrorCode names in snake_case (`PermissionDenied` → `permission_denied`), the reply outcome labels. */
const CODE_NAMES = new Map<number, string>(
  Object.entries(ErrorCode).map(([name, code]) => [code, name.replace(/[A-Z]/g, (c, i: number) => (i ? '_' : '') + c.toLowerCase())]),
);
export const outcomeOfCode = (code: number): string => CODE_NAMES.get(code) ?? 'other_error';

export interface MetricsOptions {
  /** After this long in the queue a job has either started or been given up: the call timeout (behind a busy pool a job waits until its deadline). */
  queueTimeoutMs: number;
  /** Process metrics (memory, CPU, event loop); off in tests that build many gateways. */
  processMetrics?: boolean;
  /** Calls waiting at this gateway for their tenant's admission (gateway/scheduling), by tenant. */
  admissionWaiting?: () => ReadonlyMap<string, number>;
}

const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'outcome'>;
  private readonly replies: Counter<'outcome'>;
  private readonly toolDuration: Histogram<'tool' | 'outcome'>;
  private readonly egressConnections: Counter<'result'>;
  private readonly egressBytes: Counter<'direction'>;
  /** Jobs enqueued and not yet started, with the time after which they can no longer start. */
  private readonly queued = new Map<string, number>();
  /** `backend\0tenant` of every sandbox running now. */
  private readonly sandboxes = new Set<string>();
  /** Backends seen since start: each keeps a series, at 0 once its last sandbox stopped. */
  private readonly backends = new Set<string>();

  constructor(private readonly options: MetricsOptions) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'toolgate_http_requests_total',
      help: 'HTTP requests to the JSON-RPC endpoint, by outcome',
      labelNames: ['outcome'],
      registers,
    });
    this.replies = new Counter({
      name: 'toolgate_rpc_responses_total',
      help: 'JSON-RPC responses sent, by outcome (ok or the error code name)',
      labelNames: ['outcome'],
      registers,
    });
    this.toolDuration = new Histogram({
      name: 'toolgate_tool_call_duration_seconds',
      help: 'Tool-call run time on the executor, by tool and outcome (ok, tool_error, or the error code name)',
      labelNames: ['tool', 'outcome'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    // From the executors' egress events; labels are bounded (never a tenant or a host).
    this.egressConnections = new Counter({
      name: 'toolgate_egress_connections_total',
      help: 'Sandbox egress connections by result: allowed (made and now closed), denied (policy or SSRF guard), limited (a per-tenant limit)',
      labelNames: ['result'],
      registers,
    });
    this.egressBytes = new Counter({
      name: 'toolgate_egress_bytes_total',
      help: 'Bytes relayed by the egress proxy, counted when a connection closes (in: to sandboxes, out: from them)',
      labelNames: ['direction'],
      registers,
    });
    const queued = this.queued;
    new Gauge({
      name: 'toolgate_queue_depth',
      help: 'Tool calls waiting on the bus for an executor',
      registers,
      collect() {
        const now = Date.now();
        for (const [id, expires] of queued) if (expires <= now) queued.delete(id);
        this.set(queued.size);
      },
    });
    const waiting = options.admissionWaiting;
    new Gauge({
      name: 'toolgate_admission_waiting',
      help: "Tool calls waiting at this gateway for their tenant's share of the executors (fair execution)",
      registers,
      collect() {
        let n = 0;
        for (const count of waiting?.().values() ?? []) n += count;
        this.set(n);
      },
    });
    const { sandboxes, backends } = this;
    new Gauge({
      name: 'toolgate_live_sandboxes',
      help: 'Tenant sandboxes running now, by backend',
      labelNames: ['backend'],
      registers,
      collect() {
        this.reset();
        for (const backend of backends) this.set({ backend }, 0);
        for (const key of sandboxes) this.inc({ backend: key.slice(0, key.indexOf('\0')) });
      },
    });
    // The event-loop lag histogram samples on a timer: prom-client's default of every 10 ms wakes
    // an idle gateway 100 times a second (on a busy host each wake-up waits for a core); 100 ms
    // still shows a stalled loop.
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'toolgate_', eventLoopMonitoringPrecision: 100 });
  }

  /** Follows the bus's events; returns the unsubscribe function. */
  follow(bus: Pick<BusEvents, 'subscribe'>): () => void {
    return bus.subscribe((event) => this.onEvent(event));
  }

  request(outcome: RequestOutcome): void {
    this.requests.inc({ outcome });
  }

  replied(reply: JsonRpcResponse | JsonRpcResponse[]): void {
    for (const r of Array.isArray(reply) ? reply : [reply]) this.replies.inc({ outcome: 'error' in r ? outcomeOfCode(r.error.code) : 'ok' });
  }

  contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  private onEvent(event: BusEvent): void {
    switch (event.type) {
      case 'job.enqueued':
        this.queued.set(event.jobId, event.at + this.options.queueTimeoutMs);
        break;
      case 'job.started':
        this.queued.delete(event.jobId);
        break;
      case 'job.completed':
        this.queued.delete(event.jobId);
        this.toolDuration.observe({ tool: event.tool, outcome: event.isError ? 'tool_error' : 'ok' }, event.durationMs / 1000);
        break;
      case 'job.failed':
        this.queued.delete(event.jobId);
        this.toolDuration.observe({ tool: event.tool, outcome: outcomeOfCode(event.code) }, event.durationMs / 1000);
        break;
      case 'sandbox.started':
        this.backends.add(event.backend);
        this.sandboxes.add(`${event.backend}\0${event.tenant}`);
        break;
      case 'sandbox.stopped':
        this.sandboxes.delete(`${event.backend}\0${event.tenant}`);
        break;
      case 'egress.denied':
        this.egressConnections.inc({ result: event.limited ? 'limited' : 'denied' });
        break;
      case 'egress.closed':
        this.egressConnections.inc({ result: 'allowed' });
        if (event.bytesIn > 0) this.egressBytes.inc({ direction: 'in' }, event.bytesIn);
        if (event.bytesOut > 0) this.egressBytes.inc({ direction: 'out' }, event.bytesOut);
        break;
      case 'token.revoked':
        break;
    }
  }
}
