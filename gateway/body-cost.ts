/**
 * What one identity's request bodies may cost this gateway, so that one caller's large bodies
 * never stall another's calls:
 *   - bytes in flight per identity (TOOLGATE_MAX_BODY_BYTES_IN_FLIGHT_PER_IDENTITY): a body is
 *     counted from its first byte (its whole Content-Length, when declared) until its reply is
 *     sent, so its buffer, its parsed form and its call are all covered; a body that would go
 *     over is refused 429 with Retry-After, at once when its Content-Length says so, else at the
 *     byte that crosses;
 *   - elements per body (TOOLGATE_MAX_JSON_ELEMENTS), counted while the bytes arrive (JsonShape),
 *     refused (-32600, like too deep a nesting) before the body is parsed or read to its end.
 * Both are checked before `JSON.parse`, whose cost on a body within them is a few milliseconds
 * per MiB. State is per gateway process, like the rate limits.
 */
import type { ServerResponse } from 'node:http';
import { ErrorCode } from '../shared/protocol/errors';
import { HttpProblem } from './errors';
import { JsonShape } from './json-shape';

export interface BodyCostLimits {
  /** Request body bytes one identity may have in flight at once. */
  maxBytesInFlight: number;
  /** Elements one body may hold (see JsonShape). */
  maxElements: number;
}

/** A refused body's client is told to come back after this: bodies in flight end quickly. */
export const BODY_RETRY_AFTER_SECONDS = 1;

/** The checks one request's body passes through while it is read (request-body.ts). */
export interface BodyGuards {
  /** Counts `bytes` more against the tenant's budget; throws the 429 HttpProblem when it would go over. */
  take(bytes: number): void;
  /** The body's element count; its `push` returns false past the limit. */
  shape: JsonShape;
}

export class BodyCost {
  private readonly inFlight = new Map<string, number>();

  constructor(readonly limits: BodyCostLimits) {
    if (!(limits.maxBytesInFlight > 0) || !(limits.maxElements > 0)) throw new RangeError('body cost limits must be positive');
  }

  /** Guards for one request of `tenant`; what it took is given back when `res` closes (reply sent, or the client left). */
  guards(tenant: string, res: ServerResponse): BodyGuards {
    let taken = 0;
    res.once('close', () => this.give(tenant, taken));
    return {
      take: (bytes) => {
        const now = this.inFlight.get(tenant) ?? 0;
        if (now + bytes > this.limits.maxBytesInFlight) throw this.overBudget(now);
        this.inFlight.set(tenant, now + bytes);
        taken += bytes;
      },
      shape: new JsonShape(this.limits.maxElements),
    };
  }

  /** Bytes `tenant` has in flight (for tests and metrics). */
  bytesInFlight(tenant: string): number {
    return this.inFlight.get(tenant) ?? 0;
  }

  private give(tenant: string, bytes: number): void {
    if (bytes === 0) return;
    const left = (this.inFlight.get(tenant) ?? 0) - bytes;
    if (left > 0) this.inFlight.set(tenant, left);
    else this.inFlight.delete(tenant);
  }

  private overBudget(now: number): HttpProblem {
    const max = this.limits.maxBytesInFlight;
    return new HttpProblem(
      429,
      ErrorCode.RateLimited,
      `Rate limited: this identity already has ${now} request body bytes in flight; at most ${max} may be at once (TOOLGATE_MAX_BODY_BYTES_IN_FLIGHT_PER_IDENTITY); retry after ${BODY_RETRY_AFTER_SECONDS} s`,
      { 'Retry-After': String(BODY_RETRY_AFTER_SECONDS) },
      { limit: 'bodyBytesInFlight', max, retryAfterMs: BODY_RETRY_AFTER_SECONDS * 1000 },
    );
  }
}

/**
 * The refusal of a body with more elements than allowed: a structure limit like nesting depth and
 * batch size, so the same answer as theirs (-32600 with HTTP 200), addressed to nobody (id null:
 * the body was never parsed).
 */
export function tooManyElements(max: number): HttpProblem {
  return new HttpProblem(
    200,
    ErrorCode.InvalidRequest,
    `Invalid Request: the message has more than ${max} JSON elements (TOOLGATE_MAX_JSON_ELEMENTS)`,
    {},
    { limit: max },
  );
}
