/**
 * What the egress proxy reports, one event per refusal and per finished connection: bus events
 * (shared/bus/events.ts), published by the executor and written to its audit log.
 */
import type { EgressClosedEvent, EgressDeniedEvent } from '../../shared/bus/events';

export type { EgressClosedEvent, EgressDeniedEvent };
export type EgressEvent = EgressDeniedEvent | EgressClosedEvent;
