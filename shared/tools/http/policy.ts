/**
 * What http_request may reach: the operator's exceptions to the SSRF guard (TOOLGATE_HTTP_ALLOW)
 * and the resolver the guard uses. Built once at start-up by `createHttpPolicy`; the limits
 * (timeouts, bytes, redirects) come from the tool context's `limits`.
 */
import { X509Certificate } from 'node:crypto';
import { promises as dns } from 'node:dns';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import * as tls from 'node:tls';
import ipaddr from 'ipaddr.js';
import { parseIp } from './address-class';

/** One resolved address, as `dns.lookup(host, {all: true})` returns it. */
export interface ResolvedAddress {
  address: string;
  family: number;
}
export type Resolver = (host: string) => Promise<ResolvedAddress[]>;

/** What an egress decision says (the executor's egress policy, executor/egress/policy.ts). */
export type EgressVerdict = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

/**
 * A tenant's egress policy as http_request applies it: the very rules, pins and decision the
 * executor's egress proxy applies to that tenant's sandbox (implemented in executor/egress/).
 */
export interface EgressGate {
  /** Asked before resolving (no `address`) and then for every address. */
  decide(target: { host: string; port: number; address?: string; pinned?: boolean }): EgressVerdict;
  /** Whether the operator pinned this (normalized) name (TOOLGATE_EGRESS_RESOLVE). */
  isPinned(host: string): boolean;
  /** The name's addresses: its pin, else DNS. */
  resolve(host: string): Promise<{ readonly addresses: readonly string[]; readonly pinned: boolean }>;
}

export interface HttpPolicy {
  /** Operator exceptions from TOOLGATE_HTTP_ALLOW, as given. */
  readonly allow: readonly string[];
  /** True when a CIDR entry holds `address`, or an `ip:port` entry names it with `port`. */
  allowsAddress(address: string, port: number): boolean;
  /** True when a `name:port` entry names this URL host (lower-case, no trailing dot) and port. */
  allowsHost(host: string, port: number): boolean;
  /** Resolves a host name to every address it has; the guard checks each one before connecting. */
  readonly resolve: Resolver;
  /**
   * The tenant's egress gate when egress governs that tenant (it has its own policy, or
   * TOOLGATE_EGRESS_ALLOW/_DENY are set): http_request then connects only where the gate AND
   * the SSRF guard with TOOLGATE_HTTP_ALLOW both allow. Undefined: the guard alone, as without
   * egress. Rejects when the policy cannot be read (the call is refused: fail closed).
   */
  readonly egressFor?: (tenant: string) => Promise<EgressGate | undefined>;
  /**
   * What https hops trust: what Node trusts by default (its roots and NODE_EXTRA_CA_CERTS, see
   * defaultCaCertificates) plus the operator's CAs (TOOLGATE_EGRESS_CA_FILE), built
   * once because a context with every root costs ~20 ms. Undefined: Node's defaults. The
   * certificate is verified against the URL's name either way.
   */
  readonly upstreamTls?: tls.SecureContext;
}

export interface HttpPolicyOptions {
  /** Replaces DNS; tests use it to point a name at an address without a real resolver. */
  resolve?: Resolver;
  /** See HttpPolicy.egressFor (the executor's egress service). */
  egressFor?: (tenant: string) => Promise<EgressGate | undefined>;
  /** See HttpPolicy.upstreamTls: `upstreamTrust(await readUpstreamCa(TOOLGATE_EGRESS_CA_FILE))`, built once by the composition root. */
  upstreamTls?: tls.SecureContext;
}

const systemResolve: Resolver = (host) => dns.lookup(host, { all: true });

/** An address with v4-mapped IPv6 turned into IPv4, so either spelling matches an entry. */
function unmapped(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  const addr = parseIp(address);
  return addr?.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() ? (addr as ipaddr.IPv6).toIPv4Address() : addr;
}

function entryError(entry: string, why: string): Error {
  return new Error(
    `TOOLGATE_HTTP_ALLOW entry "${entry}" is not valid (${why}): use a CIDR such as 127.0.0.1/32 or ::1/128, ` +
      'or a host:port such as 127.0.0.1:8080, [::1]:8080 or localhost:8080',
  );
}

/**
 * Parses the allow-list once. A malformed entry throws an Error naming it, which the
 * composition root reports as a start-up failure. A bare IPv4 address counts as a /32 CIDR.
 */
export function createHttpPolicy(entries: readonly string[], options: HttpPolicyOptions = {}): HttpPolicy {
  const cidrs: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> = [];
  const ipPorts = new Set<string>();
  const hostPorts = new Set<string>();

  for (const raw of entries) {
    const entry = raw.trim();
    // A bare IPv6 address is refused: "::1:8080" is a valid address, but meant [::1]:8080.
    if (isIP(entry) === 6) throw entryError(raw, 'write an IPv6 address as a CIDR or as [address]:port');
    if (entry.includes('/') || isIP(entry) === 4) {
      const [text = '', bits = '32'] = entry.split('/');
      const net = parseIp(text);
      const prefix = Number(bits);
      if (!net || !/^\d{1,3}$/.test(bits) || prefix > (net.kind() === 'ipv4' ? 32 : 128)) {
        throw entryError(raw, 'not an IP address with a prefix length');
      }
      const mapped = net.kind() === 'ipv6' && (net as ipaddr.IPv6).isIPv4MappedAddress() && prefix >= 96;
      cidrs.push(mapped ? [(net as ipaddr.IPv6).toIPv4Address(), prefix - 96] : [net, prefix]);
      continue;
    }
    const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(entry);
    const port = Number(m?.[2]);
    if (!m || !(port >= 1 && port <= 65535)) throw entryError(raw, 'expected host:port with a port from 1 to 65535');
    let host: string;
    try {
      // The URL parser spells the host the way request URLs will be spelled (IPv4 forms, case, IDN).
      host = new URL(`http://${m[1]}/`).hostname;
    } catch {
      throw entryError(raw, 'the host is not a valid host name or address');
    }
    const ip = unmapped(host);
    if (ip) ipPorts.add(`${ip.toNormalizedString()}:${port}`);
    else if (/^[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/.test(host)) hostPorts.add(`${host.replace(/\.$/, '')}:${port}`);
    else throw entryError(raw, 'the host is not a valid host name or address');
  }

  return Object.freeze({
    allow: Object.freeze([...entries]),
    allowsAddress(address: string, port: number): boolean {
      const addr = unmapped(address);
      if (!addr) return false;
      if (ipPorts.has(`${addr.toNormalizedString()}:${port}`)) return true;
      return cidrs.some(([net, bits]) => net.kind() === addr.kind() && addr.match(net, bits));
    },
    allowsHost(host: string, port: number): boolean {
      return hostPorts.has(`${host}:${port}`);
    },
    resolve: options.resolve ?? systemResolve,
    ...(options.egressFor ? { egressFor: options.egressFor } : {}),
    ...(options.upstreamTls ? { upstreamTls: options.upstreamTls } : {}),
  });
}

/** `tls.getCACertificates`, in Node 22.15+/23.5+ only (and not yet in the types this project builds with). */
type CaLister = (type: 'default') => string[];
let defaults: readonly string[] | undefined;

/**
 * The CAs Node trusts when a connection names none: its roots plus NODE_EXTRA_CA_CERTS. A
 * context given `ca` trusts only what it lists, so these go in it too, or a deployment's private CA
 * (README: the one for Redis TLS) would stop working for http_request once
 * TOOLGATE_EGRESS_CA_FILE is set. Newer Node lists them itself; before it, the file is read here
 * once. NODE_EXTRA_CA_CERTS is Node's own setting, read as Node reads it (not toolgate's config):
 * Node skips a file it cannot read (with a warning), and so does this.
 */
export function defaultCaCertificates(): readonly string[] {
  if (defaults) return defaults;
  const list = (tls as { getCACertificates?: CaLister }).getCACertificates;
  if (list) return (defaults = list('default'));
  const extra = process.env.NODE_EXTRA_CA_CERTS;
  let pem: string[] = [];
  if (extra)
    try {
      pem = [readFileSync(extra, 'utf8')];
    } catch {
      pem = [];
    }
  return (defaults = [...tls.rootCertificates, ...pem]);
}

/**
 * One TLS context for upstream connections that trusts what Node trusts by default plus `ca`
 * (TOOLGATE_EGRESS_CA_FILE's certificates), or undefined when `ca` is empty (Node's defaults
 * apply as they are). Built once per process and shared by http_request and the egress proxy:
 * a context with every root costs about 20 ms.
 */
export function upstreamTrust(ca: readonly string[]): tls.SecureContext | undefined {
  return ca.length > 0 ? tls.createSecureContext({ ca: [...defaultCaCertificates(), ...ca] }) : undefined;
}

/**
 * The CA certificates in TOOLGATE_EGRESS_CA_FILE (none when unset), for `upstreamTrust`.
 * Read once by the composition root; a file that cannot be read or holds no certificate stops
 * start-up with a sentence naming it (TLS would otherwise ignore it and refuse every host it signs).
 */
export async function readUpstreamCa(file: string | undefined): Promise<string[]> {
  if (file === undefined) return [];
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`TOOLGATE_EGRESS_CA_FILE ${file} could not be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  try {
    new X509Certificate(pem);
  } catch {
    throw new Error(`TOOLGATE_EGRESS_CA_FILE ${file} holds no PEM certificate`);
  }
  return [pem];
}
