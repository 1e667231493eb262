/**
 * Egress accounting for one executor: per-tenant limits (connections at once, bytes per UTC
 * day), the events of every refusal and finished connection, and two Prometheus counters with
 * bounded labels (never a tenant or a host):
 *   toolgate_egress_connections_total{result="allowed|denied|limited|failed"}
 *   toolgate_egress_bytes_total{direction="in|out"}
 * One instance serves every channel of the executor, so a tenant's limits hold across its
 * channels. The counts live in this process: a tenant's sandbox lives on one executor.
 */
import { Counter, Registry } from 'prom-client';
import type { EgressEvent } from './events';

export interface EgressLimits {
  /** Upstream connections one tenant may have open at once. */
  maxConnections: number;
  /** Bytes (in + out) one tenant may move per UTC day; 0: no limit. */
  bytesPerDay: number;
}

export const DEFAULT_EGRESS_LIMITS: Readonly<EgressLimits> = Object.freeze({ maxConnections: 64, bytesPerDay: 1024 ** 3 });

export type Direction = 'in' | 'out';

const DAY_MS = 24 * 3600 * 1000;
const FLUSH_BYTES = 1024 * 1024;

/** One upstream connection's slot, from `open` until `close`. */
export interface EgressLease {
  /** Records the connection as made, to `address`. */
  connected(address: string): void;
  /**
   * Counts `bytes` about to be relayed. False when they would pass the tenant's daily limit:
   * the caller drops them and ends the connection (the reason is then `cut`).
   */
  add(direction: Direction, bytes: number): boolean;
  /** Why `add` refused, once it has. */
  readonly cut: string | undefined;
  /**
   * Frees the slot and reports the connection (egress.closed if it was made). Idempotent.
   * `wire`: the upstream socket's own counts, which also hold what `add` never saw (an HTTP
   * request's and response's headers); the difference is added to the day and the counters.
   */
  close(error?: string, wire?: { in: number; out: number }): void;
}

export interface EgressAccounting {
  /** A slot for a new connection to host:port, or the refusal reason when a limit is reached (reported as denied). */
  open(tenant: string, host: string, port: number): EgressLease | { refused: string };
  /** Reports a refusal made before `open` (policy, SSRF guard, resolution). */
  denied(tenant: string, host: string, port: number, reason: string): void;
}

export interface EgressAccountingOptions {
  limits?: Partial<EgressLimits>;
  /** Where the counters are registered (the executor's metrics registry). */
  registry?: Registry;
  /** Receives every event (the lead's bus publisher and audit log). Must not throw. */
  onEvent?: (event: EgressEvent) => void;
  now?: () => number;
}

function counter<L extends string>(registry: Registry | undefined, name: string, help: string, label: L): Counter<L> {
  const existing = registry?.getSingleMetric(name);
  if (existing) return existing as Counter<L>;
  return new Counter({ name, help, labelNames: [label], registers: registry ? [registry] : [] });
}

function sizeText(bytes: number): string {
  for (const [unit, size] of [
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const) {
    if (bytes >= size) return `${+(bytes / size).toFixed(2)} ${unit}`;
  }
  return `${bytes} bytes`;
}

export function createEgressAccounting(options: EgressAccountingOptions = {}): EgressAccounting {
  const limits = { ...DEFAULT_EGRESS_LIMITS, ...options.limits };
  const now = options.now ?? Date.now;
  const emit = options.onEvent ?? (() => undefined);
  const connections = counter(options.registry, 'toolgate_egress_connections_total', 'Egress connections by result', 'result');
  const bytesTotal = counter(options.registry, 'toolgate_egress_bytes_total', 'Bytes relayed by the egress proxy (in: to sandboxes)', 'direction');
  const open = new Map<string, number>();
  // The UTC day [dayStart, dayEnd) the counts are for: a number compare per relayed chunk.
  let dayStart = NaN;
  let dayEnd = NaN;
  let used = new Map<string, number>();
  /** Bytes counted but not yet added to toolgate_egress_bytes_total: one counter update per MiB, not per chunk. */
  const unflushed = { in: 0, out: 0 };
  const flush = (direction: Direction) => {
    if (unflushed[direction] === 0) return;
    bytesTotal.inc({ direction }, unflushed[direction]);
    unflushed[direction] = 0;
  };

  const usage = (tenant: string): number => {
    const t = now();
    if (!(t >= dayStart && t < dayEnd)) {
      // A new day forgets yesterday's counts at once, so the map holds one day's tenants at most.
      dayStart = t - (t % DAY_MS);
      dayEnd = dayStart + DAY_MS;
      used = new Map();
    }
    return used.get(tenant) ?? 0;
  };
  const denied = (tenant: string, host: string, port: number, reason: string, result: 'denied' | 'limited' = 'denied') => {
    connections.inc({ result });
    emit({ type: 'egress.denied', tenant, host, port, reason, ...(result === 'limited' ? { limited: true as const } : {}), at: now() });
  };

  return {
    denied,
    open(tenant, host, port) {
      const active = open.get(tenant) ?? 0;
      let refused: string | undefined;
      if (active >= limits.maxConnections) refused = `limit: ${limits.maxConnections} connections at once for this tenant`;
      else if (limits.bytesPerDay > 0 && usage(tenant) >= limits.bytesPerDay) {
        refused = `limit: this tenant's ${sizeText(limits.bytesPerDay)} of egress for today is used`;
      }
      if (refused) {
        denied(tenant, host, port, refused, 'limited');
        return { refused };
      }
      open.set(tenant, active + 1);
      const started = now();
      const moved = { in: 0, out: 0 };
      let address: string | undefined;
      let cut: string | undefined;
      let closed = false;
      return {
        get cut() {
          return cut;
        },
        connected(at) {
          address = at;
          connections.inc({ result: 'allowed' });
        },
        add(direction, bytes) {
          const total = usage(tenant) + bytes;
          if (limits.bytesPerDay > 0 && total > limits.bytesPerDay) {
            cut ??= `limit: this tenant's ${sizeText(limits.bytesPerDay)} of egress for today is used`;
            // The day is over for this tenant: a cut transfer is not followed by small ones in its remainder.
            used.set(tenant, limits.bytesPerDay);
            return false;
          }
          used.set(tenant, total);
          moved[direction] += bytes;
          if ((unflushed[direction] += bytes) >= FLUSH_BYTES) flush(direction);
          return true;
        },
        close(error, wire) {
          if (closed) return;
          closed = true;
          for (const direction of ['in', 'out'] as const) {
            const unseen = (wire?.[direction] ?? 0) - moved[direction];
            if (unseen <= 0) continue;
            moved[direction] += unseen;
            used.set(tenant, usage(tenant) + unseen);
            unflushed[direction] += unseen;
          }
          flush('in');
          flush('out');
          const left = (open.get(tenant) ?? 1) - 1;
          if (left > 0) open.set(tenant, left);
          else open.delete(tenant);
          if (address === undefined) {
            connections.inc({ result: 'failed' });
            return;
          }
          const why = cut ?? error;
          emit({
            type: 'egress.closed',
            tenant,
            host,
            port,
            address,
            bytesIn: moved.in,
            bytesOut: moved.out,
            durationMs: now() - started,
            ...(why ? { error: why } : {}),
            at: now(),
          });
        },
      };
    },
  };
}
