/**
 * One http_request call on the wire: the request, then each redirect followed by hand so every
 * hop's URL is checked here and its connection is checked by the guard. Credentials never
 * follow a redirect to another origin.
 */
import { STATUS_CODES } from 'node:http';
import type { Dispatcher } from 'undici';
import { ToolError } from '../../protocol/errors';
import { bodiless, bodyDecoding, uncheckedCoding } from '../../secrets/content-coding';
import { decodedBody, readCapped } from './body';
import { loadUndici } from './undici';

export interface HttpCall {
  url: URL;
  method: string;
  /** Lower-case names. */
  headers: Record<string, string>;
  body: Buffer | undefined;
  followRedirects: boolean;
  maxRedirects: number;
  maxBytes: number;
  signal: AbortSignal;
  /** Told each URL before it is requested, so a failure can name the hop it happened on. */
  onHop?: (url: URL) => void;
  /** Secrets hook (secret-binding.ts): the headers actually sent to each hop's URL; `headers` stays as the caller wrote them. */
  headersFor?: (url: URL, headers: Readonly<Record<string, string>>) => Record<string, string>;
  /** Secrets hook: true when the reply from `url` is to be decoded (its values are redacted after); another coding is refused. */
  decodes?: (url: URL) => boolean;
  /**
   * Secrets hook: bytes read past `maxBytes`, so that a value the cap would cut is still whole
   * when it is redacted. The reply may then hold up to `maxBytes + readPast` bytes, and
   * `truncated` says whether more followed those; the caller cuts to `maxBytes` after redacting.
   */
  readPast?: number;
}

export interface HttpReply {
  status: number;
  statusText?: string;
  headers: Record<string, string | string[]>;
  bytes: Buffer;
  truncated: boolean;
  /** The URL that answered (after redirects). */
  url: string;
  /** Each URL a redirect led to, in order. */
  redirects: string[];
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Headers that identify the caller to one origin; dropped when a redirect leaves it. */
const ORIGIN_BOUND = ['authorization', 'cookie', 'proxy-authorization', 'host'];
/** Headers that describe the request body; dropped when a redirect turns the request into a GET. */
const BODY_HEADERS = ['content-type', 'content-length', 'content-encoding', 'content-language', 'content-location', 'transfer-encoding'];

/** Refuses what http_request never sends, before any connection: other schemes, credentials in the URL. */
export function checkUrl(url: URL): void {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ToolError(`Only http and https URLs are supported, not ${url.protocol.replace(/:$/, '')}: ${url.href}`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new ToolError('URLs with credentials (user:password@host) are not supported; send an Authorization header instead');
  }
}

export async function exchange(call: HttpCall, dispatcher: Dispatcher): Promise<HttpReply> {
  let { url, method, body } = call;
  const headers = { ...call.headers };
  const redirects: string[] = [];
  const { request } = loadUndici();
  for (;;) {
    checkUrl(url);
    call.onHop?.(url);
    const sent = call.headersFor ? call.headersFor(url, headers) : headers;
    const res = await request(url, { dispatcher, method, headers: sent, body, signal: call.signal });
    const location = res.headers.location;
    if (call.followRedirects && REDIRECT_STATUSES.has(res.statusCode) && typeof location === 'string') {
      // Discard the redirect's own body; the connection may be reused for a same-origin hop.
      await res.body.dump();
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw new ToolError(`${url.href} redirected to an invalid URL: ${location}`);
      }
      if (redirects.length >= call.maxRedirects) {
        throw new ToolError(`Too many redirects: stopped after ${call.maxRedirects} (TOOLGATE_HTTP_MAX_REDIRECTS); the next one pointed to ${next.href}`);
      }
      checkUrl(next);
      if (next.origin !== url.origin) for (const name of ORIGIN_BOUND) delete headers[name];
      // What browsers and fetch do: 303 becomes GET, and so does a POST answered by 301/302.
      if ((res.statusCode === 303 && method !== 'HEAD') || ((res.statusCode === 301 || res.statusCode === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
        for (const name of BODY_HEADERS) delete headers[name];
      }
      redirects.push(next.href);
      url = next;
      continue;
    }
    const answered = flatten(res.headers);
    const plan = call.decodes?.(url) ? decoding(method, res.statusCode, answered) : { decoders: [] };
    if ('unsupported' in plan) {
      // Its body could not be checked for the values sent there: none of it reaches the caller.
      await res.body.dump();
      throw new ToolError(`Refused: ${url.host} answered with ${plan.unsupported}, which http_request cannot check for secrets`);
    }
    const decoders = plan.decoders.map((make) => make());
    const { bytes, truncated } =
      method === 'HEAD'
        ? (await res.body.dump(), { bytes: Buffer.alloc(0), truncated: false })
        : await readCapped(decoders.length > 0 ? decodedBody(res.body, decoders, url.host) : res.body, call.maxBytes + (call.readPast ?? 0));
    if (decoders.length > 0) {
      delete answered['content-encoding'];
      delete answered['content-length'];
    }
    const reply: HttpReply = { status: res.statusCode, headers: answered, bytes, truncated, url: url.href, redirects };
    const statusText = STATUS_CODES[res.statusCode];
    if (statusText !== undefined) reply.statusText = statusText;
    return reply;
  }
}

/**
 * How the body of a reply from a host with a secret is decoded (nothing to decode without a
 * body), or the coding that keeps it from being checked: a content coding not decoded here, or a
 * transfer coding other than chunked (the client undoes only that one).
 */
function decoding(method: string, status: number, headers: Record<string, string | string[]>): ReturnType<typeof bodyDecoding> {
  const list = (v: string | string[] | undefined) => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
  if (bodiless(method, status, list(headers['content-length'])[0])) return { decoders: [] };
  const plan = bodyDecoding(list(headers['content-encoding']));
  const unchecked = uncheckedCoding(plan, list(headers['transfer-encoding']));
  return unchecked !== undefined ? { unsupported: unchecked } : plan;
}

// fromEntries defines own properties, so a header named `__proto__` stays a plain header.
function flatten(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  return Object.fromEntries(Object.entries(headers).filter((e): e is [string, string | string[]] => e[1] !== undefined));
}
