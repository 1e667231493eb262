/**
 * What the egress proxy does to one HTTP exchange with a host that has a tenant's secret: the
 * request's header values get the values for their placeholders (Basic credentials included)
 * and the secrets' header templates, it asks only for content codings the proxy decodes and
 * never for a range; the response's header values and its body (decoded from gzip, deflate or
 * br first) get every value replaced by `[secret:NAME]`, so a server that echoes a credential
 * does not hand it to the sandbox. A body in any other coding (content or transfer) is refused.
 * Every swap is recorded (tool `egress`).
 */
import type * as http from 'node:http';
import { Transform, TransformCallback } from 'node:stream';
import { bodiless, bodyDecoding, chain, decodableAcceptEncoding, uncheckedCoding, WITHHELD_FROM_SECRET_HOSTS } from '../../shared/secrets/content-coding';
import type { SecretSet } from '../../shared/secrets/secret-set';
import { Refusal, relay, shown } from '../egress/upstream';
import type { ChannelSecrets } from './service';

/** The proxy's hook for one request (executor/egress/forward.ts and intercept.ts). */
export interface RequestRewrite {
  /** The end-to-end request headers to send upstream. */
  request(raw: readonly string[]): string[];
  /**
   * Answers the sandbox with upstream's response `up`: its header values redacted, its body
   * decoded and redacted (sent chunked or close-delimited, without Content-Encoding and
   * Content-Length), or a 502 when its content coding is not one decoded here or its
   * Transfer-Encoding names a coding other than chunked.
   */
  respond(up: http.IncomingMessage, res: http.ServerResponse, pass: ResponsePass): void;
}

/** What `respond` needs from the proxy path it runs on. */
export interface ResponsePass {
  /** The request's method (a HEAD answer has no body). */
  method: string;
  /** `up`'s end-to-end headers. */
  headers: readonly string[];
  /** Asked before each body chunk from upstream; false: the tenant's day is spent, `cut`. */
  count(bytes: number): boolean;
  /** Drops both connections (a body that fails to decode ends here: never its raw bytes). */
  cut(): void;
  /** Answers with a refusal, as the path writes them. */
  refuse(refusal: Refusal): void;
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

const headerValues = (raw: readonly string[], name: string): string[] => {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if ((raw[i] as string).toLowerCase() === name) out.push(raw[i + 1] as string);
  return out;
};

/**
 * `raw` without the withheld headers, and with one Accept-Encoding naming only codings the proxy
 * decodes (in place of the first the client sent, else added): a body in any other coding could
 * not be checked for values.
 */
function checkable(raw: readonly string[]): string[] {
  const value = decodableAcceptEncoding(headerValues(raw, 'accept-encoding'));
  const out: string[] = [];
  let placed = false;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    const lower = name.toLowerCase();
    if (WITHHELD_FROM_SECRET_HOSTS.has(lower)) continue;
    if (lower !== 'accept-encoding') out.push(name, raw[i + 1] as string);
    else if (!placed) {
      out.push(name, value);
      placed = true;
    }
  }
  return placed ? out : [...out, 'accept-encoding', value];
}

export function requestRewrite(set: SecretSet, target: { host: string; port: number }, used: ChannelSecrets['used']): RequestRewrite {
  const { host, port } = target;
  const values = set.valueForms;
  return {
    request(raw) {
      const bound = set.bind(checkable(raw), host, port);
      for (const name of bound.used) used({ tenant: set.tenant, name, host, port, tool: 'egress' });
      return bound.headers;
    },
    respond(up, res, { method, headers, count, cut, refuse }) {
      const status = up.statusCode ?? 502;
      const plan = bodyDecoding(headerValues(headers, 'content-encoding'));
      const empty = bodiless(method, status, headerValues(headers, 'content-length')[0]);
      // Transfer-Encoding is hop-by-hop (not in `headers`): read from upstream's own.
      const unchecked = uncheckedCoding(plan, headerValues(up.rawHeaders, 'transfer-encoding'));
      if (unchecked !== undefined && !empty) {
        up.destroy();
        return refuse({
          status: 502,
          line: `toolgate egress: ${shown(target)} answered with ${set.redactText(unchecked)}, which the proxy cannot check for secrets`,
        });
      }
      // A bodiless answer loses a decodable label as its GET would (so a 304 matches the decoded copy
      // the sandbox keeps); another label stays, there being nothing to check.
      const decoders = 'decoders' in plan ? plan.decoders : [];
      const drop = new Set(decoders.length > 0 ? ['content-length', 'content-encoding'] : ['content-length']);
      const out: string[] = [];
      for (let i = 0; i + 1 < headers.length; i += 2) {
        const name = headers[i] as string;
        if (!drop.has(name.toLowerCase())) out.push(name, set.redactText(headers[i + 1] as string));
      }
      res.writeHead(status, up.statusMessage, out);
      const redact = new RedactStream(set, values);
      const stages = [...(empty ? [] : decoders.map((make) => make())), redact];
      chain(stages, cut).pipe(res);
      // Frees the decoders' zlib state at once when the sandbox goes away.
      res.once('close', () => stages.forEach((s) => s.destroy()));
      relay(up, stages[0] ?? redact, count, cut);
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
