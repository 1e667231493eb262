/**
 * http_request's use of the caller's secrets (shared/secrets/): a header value may hold
 * `{{secret:NAME}}`, swapped for the value only when the request's host matches the secret's
 * host rules (any other host, or a name the caller has no secret by, refuses the call before it
 * is sent); a secret's header template is added for a matching host. On a redirect to another
 * origin the headers that held a placeholder are dropped, so a value never follows a redirect
 * off its host, and a request that carries a value may neither name another host to route by
 * (Host and its kin) nor go in cleartext to port 443. Every value is redacted from the reply
 * before the model sees it; a host a secret is bound to is asked for whole bodies only (no
 * Range) in content codings that can be decoded to be checked (undici's `request` decodes
 * nothing itself: exchange.ts does, through `decodes`).
 */
import { ToolError } from '../../protocol/errors';
import { decodableAcceptEncoding, WITHHELD_FROM_SECRET_HOSTS } from '../../secrets/content-coding';
import { SecretBroker, SecretsUnavailable } from '../../secrets/broker';
import { hasPlaceholder } from '../../secrets/placeholder';
import type { SecretSet } from '../../secrets/secret-set';
import type { HttpReply } from './exchange';
import { normalizeHost } from './guard';

export interface RequestSecrets {
  /** The headers to send to `url` (each hop of the call), with values swapped in; records each use. */
  headersFor(url: URL, headers: Readonly<Record<string, string>>): Record<string, string>;
  /** True when the reply from `url` must arrive decoded to be redacted: a host a secret is bound to. */
  decodes(url: URL): boolean;
  /** Bytes to read past the byte cap (HttpCall.readPast): the longest form of a value, less one. */
  readonly readPast: number;
  /**
   * The reply with every value redacted, its body then cut to `maxBytes`. At a cut, a tail that
   * could be the start of a value is dropped too: no part of a value survives the cap.
   */
  redact(reply: HttpReply, maxBytes: number): HttpReply;
  redactText(text: string): string;
}

const BASIC = /^\s*basic\s+([A-Za-z0-9+/=_-]+)\s*$/i;
/** A header value that carries a placeholder, as written or inside Basic credentials. */
const carries = (value: string): boolean => {
  if (hasPlaceholder(value)) return true;
  const basic = BASIC.exec(value);
  return basic !== null && hasPlaceholder(Buffer.from(basic[1] as string, 'base64').toString('utf8'));
};

/**
 * Headers a shared host (a CDN, a reverse proxy) may route a request by instead of its
 * connection: with one of them a value bound to the URL's host could be delivered to another
 * site behind the same address. undici sends `host` as given; it refuses names that are not
 * tokens, but a pseudo-header (`:authority`) is refused here too, whatever the dispatcher.
 * prepareRequest lower-cases names, so `HOST` and duplicates arrive here as `host`.
 */
const ROUTING_HEADERS = new Set(['host', 'x-forwarded-host', 'x-host', 'x-original-host', 'forwarded']);

/**
 * Throws (nothing is sent) when a request that carries the values of `used` could reach anyone
 * but the host its URL names: a routing header of the caller's, or cleartext to port 443 (a
 * host rule without a port covers 80 and 443, and 443 is meant for TLS).
 */
function refuseUnsafeCarry(hop: URL, port: number, used: readonly string[], pairs: ReadonlyArray<readonly [string, string]>): void {
  const names = used.join(', ');
  const routing = pairs.find(([name]) => ROUTING_HEADERS.has(name.toLowerCase()) || name.startsWith(':'));
  if (routing)
    throw new ToolError(
      `Refused: a request that carries ${names} may not set ${routing[0]} (a shared host could route it to another site by that header); the URL alone names the host`,
    );
  if (hop.protocol === 'http:' && port === 443)
    throw new ToolError(`Refused: ${names} would be sent in cleartext to ${hop.host}; a secret goes to port 443 only over https`);
}

const target = (url: URL) => ({ host: normalizeHost(url.hostname), port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80) });

/**
 * The call's secret binding, or undefined when it needs none. Throws a ToolError (the call is
 * refused) when a header asks for a secret that cannot be sent to this host, or when secrets
 * cannot be used and a header asks for one.
 */
export async function bindRequestSecrets(
  broker: SecretBroker | undefined,
  tenant: string | undefined,
  url: URL,
  headers: Readonly<Record<string, string>>,
): Promise<RequestSecrets | undefined> {
  const wants = Object.values(headers).some(carries);
  if (!broker || tenant === undefined) {
    if (wants) throw new ToolError('Refused: a header holds {{secret:…}}, but secrets are not available in this server');
    return undefined;
  }
  let set: SecretSet;
  try {
    set = await broker.open(tenant);
  } catch (err) {
    if (!wants) return undefined;
    throw new ToolError(err instanceof SecretsUnavailable ? `Refused: ${err.message}` : 'Refused: the secret store could not be read; try again later');
  }
  if (set.size === 0 && !wants) return undefined;
  const first = target(url);
  const refused = set.bind(Object.entries(headers).flat(), first.host, first.port).refused;
  if (refused.length > 0) throw new ToolError(`Refused: ${refused.map((r) => r.reason).join('; ')}`);
  const origin = url.origin;

  return {
    headersFor(hop, current) {
      const { host, port } = target(hop);
      // Off the first origin, a header that named a secret is not sent at all (neither value nor placeholder).
      const pairs = Object.entries(current).filter(([, v]) => hop.origin === origin || !carries(v));
      const bound = set.bind(pairs.flat(), host, port);
      if (bound.used.length > 0) refuseUnsafeCarry(hop, port, bound.used, pairs);
      for (const name of bound.used) broker.used({ tenant, name, host, port, tool: 'http_request' });
      const out: Record<string, string> = {};
      for (let i = 0; i + 1 < bound.headers.length; i += 2) {
        Object.defineProperty(out, (bound.headers[i] as string).toLowerCase(), {
          value: bound.headers[i + 1],
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      if (set.forHost(host, port).length > 0) {
        // No ranges (WITHHELD_FROM_SECRET_HOSTS): the whole body is fetched, redacted whole, and max_bytes still caps it.
        for (const name of WITHHELD_FROM_SECRET_HOSTS) delete out[name];
        // A body in a coding that cannot be decoded here could not be checked for the values sent.
        out['accept-encoding'] = decodableAcceptEncoding(out['accept-encoding'] ? [out['accept-encoding']] : []);
      }
      return out;
    },
    decodes(hop) {
      const { host, port } = target(hop);
      return set.forHost(host, port).length > 0;
    },
    readPast: set.longestValue - 1,
    redact(reply, maxBytes) {
      const headers: HttpReply['headers'] = {};
      for (const [name, value] of Object.entries(reply.headers)) {
        const v = Array.isArray(value) ? value.map((x) => set.redactText(x)) : set.redactText(value);
        Object.defineProperty(headers, name, { value: v, enumerable: true, writable: true, configurable: true });
      }
      // Redacted before the cut: a value the cut went through would no longer match.
      let bytes = set.redactBytes(reply.bytes);
      let truncated = reply.truncated;
      if (bytes.length > maxBytes) {
        bytes = bytes.subarray(0, maxBytes);
        truncated = true;
      }
      if (truncated) bytes = withoutValueStart(bytes, set.valueForms);
      return {
        ...reply,
        headers,
        bytes,
        truncated,
        url: set.redactText(reply.url),
        redirects: reply.redirects.map((r) => set.redactText(r)),
      };
    },
    redactText: (text) => set.redactText(text),
  };
}

/**
 * `bytes` without its longest tail that begins a form of a value. A value the read stopped
 * inside is not whole, so it was not redacted, and redacting shorter marks before it can pull
 * its start back under the cap: that start must go, however short.
 */
export function withoutValueStart(bytes: Buffer, forms: readonly Buffer[]): Buffer {
  let keep = bytes.length;
  for (const form of forms) {
    for (let k = Math.min(form.length - 1, bytes.length); k > bytes.length - keep; k--) {
      if (bytes.subarray(bytes.length - k).equals(form.subarray(0, k))) {
        keep = bytes.length - k;
        break;
      }
    }
  }
  return bytes.subarray(0, keep);
}
