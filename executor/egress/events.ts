/**
 * What the egress proxy reports, one event per refusal and per finished connection, shaped
 * like the bus's events (shared/bus/events.ts) so they can join its union and the audit log.
 * Host names and bytes only: never request lines, headers or payload.
 */

/** A connection the proxy refused (policy, SSRF guard or a limit) before connecting. */
export interface EgressDeniedEvent {
  type: 'egress.denied';
  tenant: string;
  host: string;
  port: number;
  /** The sentence the client got in its 403 body, after "refused host:port: ". */
  reason: string;
  at: number;
}

/** An upstream connection that was opened and has ended (normally, by error, or cut at a limit). */
export interface EgressClosedEvent {
  type: 'egress.closed';
  tenant: string;
  host: string;
  port: number;
  /** The address connected to (the one the policy checked). */
  address: string;
  /** Bytes received from upstream (to the sandbox) and sent upstream (from it). */
  bytesIn: number;
  bytesOut: number;
  durationMs: number;
  /** Why it ended early, if it did: "daily byte limit reached", a socket error code, … */
  error?: string;
  at: number;
}

export type EgressEvent = EgressDeniedEvent | EgressClosedEvent;
