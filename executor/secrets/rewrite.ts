/**
 * What the egress proxy does to one HTTP exchange with a host that has a tenant's secret: the
 * request's header values get the values for their placeholders (Basic credentials included)
 * and the secrets' header templates; the response's header values and its body (when not
 * compressed) get every value replaced by `[secret:NAME]`, so a server that echoes a credential
 * does not hand it to the sandbox. Every swap is recorded (tool `egress`).
 */
import { Transform, TransformCallback } from 'node:stream';
import type { SecretSet } from '../../shared/secrets/secret-set';
import type { ChannelSecrets } from './service';

/** The proxy's hook for one request (executor/egress/forward.ts and intercept.ts). */
export interface RequestRewrite {
  /** The end-to-end request headers to send upstream. */
  request(raw: readonly string[]): string[];
  /** The end-to-end response headers to pass back; `rewritten`: the body goes through `responseBody` (its length changes). */
  responseHeaders(raw: readonly string[], rewritten: boolean): string[];
  /** A stream the response body passes through, or undefined to pass it as it is (a compressed body). */
  responseBody(raw: readonly string[]): Transform | undefined;
}

/** The rewrite for requests to host:port, or undefined when none of the tenant's secrets is bound there. */
export type RewriteFor = (target: { host: string; port: number }) => Promise<RequestRewrite | undefined>;

/** Replaces values in a byte stream, holding back only as much as a value could still straddle. */
export class RedactStream extends Transform {
  private tail = Buffer.alloc(0);

  constructor(
    private readonly set: SecretSet,
    private readonly values: readonly Buffer[],
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const buf = this.tail.length > 0 ? Buffer.concat([this.tail, chunk]) : chunk;
    let cut = Math.max(0, buf.length - (this.set.longestValue - 1));
    // A whole value across the cut moves the cut before it: no part of a value leaves unredacted.
    for (let moved = true; moved;) {
      moved = false;
      for (const v of this.values) {
        const at = buf.indexOf(v, Math.max(0, cut - v.length + 1));
        if (at !== -1 && at < cut) [cut, moved] = [at, true];
      }
    }
    this.tail = Buffer.from(buf.subarray(cut));
    if (cut > 0) this.push(this.set.redactBytes(buf.subarray(0, cut)));
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.tail.length > 0) this.push(this.set.redactBytes(this.tail));
    done();
  }
}

const header = (raw: readonly string[], name: string): string | undefined => {
  for (let i = 0; i + 1 < raw.length; i += 2) if ((raw[i] as string).toLowerCase() === name) return raw[i + 1];
  return undefined;
};

export function requestRewrite(set: SecretSet, target: { host: string; port: number }, used: ChannelSecrets['used']): RequestRewrite {
  const { host, port } = target;
  const values = set.valueForms;
  return {
    request(raw) {
      const bound = set.bind(raw, host, port);
      for (const name of bound.used) used({ tenant: set.tenant, name, host, port, tool: 'egress' });
      return bound.headers;
    },
    responseHeaders(raw, rewritten) {
      const out: string[] = [];
      for (let i = 0; i + 1 < raw.length; i += 2) {
        const name = raw[i] as string;
        if (rewritten && name.toLowerCase() === 'content-length') continue;
        out.push(name, set.redactText(raw[i + 1] as string));
      }
      return out;
    },
    responseBody(raw) {
      const encoding = (header(raw, 'content-encoding') ?? 'identity').trim().toLowerCase();
      return encoding === 'identity' && values.length > 0 ? new RedactStream(set, values) : undefined;
    },
  };
}

/** The channel's rewrite lookup for `tenant` over `secrets`. */
export function rewriteFor(tenant: string, secrets: ChannelSecrets): RewriteFor {
  return async (target) => {
    const set = await secrets.forTarget(tenant, target.host, target.port);
    return set ? requestRewrite(set, target, secrets.used) : undefined;
  };
}
