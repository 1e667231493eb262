/**
 * How the egress proxy turns a name into the addresses it checks and connects to: the
 * operator's pins (TOOLGATE_EGRESS_RESOLVE=name=ip,…) first, DNS otherwise. Sandboxes have no
 * DNS of their own; this is the only resolver their traffic meets.
 */
import { isIP } from 'node:net';
import type { Resolver } from '../../shared/tools/http/policy';
import { promises as dns } from 'node:dns';
import { EgressRuleError, normalizeTargetHost } from './rules';

export interface ResolvedTarget {
  /** Every address, in the order to try them; the proxy checks each before connecting. */
  readonly addresses: readonly string[];
  /** True when the addresses come from an operator's pin. */
  readonly pinned: boolean;
}

export interface EgressResolver {
  /** Whether `host` (normalized) is pinned: known before any lookup. */
  isPinned(host: string): boolean;
  /** The addresses for a normalized host; an IP address resolves to itself. Rejects as dns.lookup does. */
  resolve(host: string): Promise<ResolvedTarget>;
}

/**
 * Parses `name=ip` entries (comma-separated strings or a list). A pin is the operator's decision
 * about an internal mirror: it reaches the pinned address even if private, when a rule allows the name.
 */
export function parsePins(input: string | readonly string[], source = 'TOOLGATE_EGRESS_RESOLVE'): ReadonlyMap<string, string> {
  const pins = new Map<string, string>();
  const items = (typeof input === 'string' ? [input] : input).flatMap((s) => s.split(',')).map((s) => s.trim());
  for (const entry of items.filter(Boolean)) {
    const eq = entry.indexOf('=');
    const name = normalizeTargetHost(entry.slice(0, eq).trim());
    const ipText = entry.slice(eq + 1).trim();
    const ip = ipText.startsWith('[') && ipText.endsWith(']') ? ipText.slice(1, -1) : ipText;
    if (eq < 1 || name === undefined || isIP(name) !== 0 || isIP(ip) === 0) {
      throw new EgressRuleError(`${source}: "${entry}" is not valid; expected name=ip, such as mirror.internal=10.0.0.5 or mirror.internal=::1`);
    }
    pins.set(name, ip);
  }
  return pins;
}

const systemLookup: Resolver = (host) => dns.lookup(host, { all: true, verbatim: true });

export interface EgressResolverOptions {
  pins?: ReadonlyMap<string, string>;
  /** Replaces DNS (tests). */
  lookup?: Resolver;
}

export function createEgressResolver(options: EgressResolverOptions = {}): EgressResolver {
  const pins = options.pins ?? new Map<string, string>();
  const lookup = options.lookup ?? systemLookup;
  return Object.freeze({
    isPinned: (host: string) => pins.has(host),
    async resolve(host: string): Promise<ResolvedTarget> {
      const pin = pins.get(host);
      if (pin !== undefined) return { addresses: [pin], pinned: true };
      if (isIP(host) !== 0) return { addresses: [host], pinned: false };
      const found = await lookup(host);
      return { addresses: [...new Set(found.map((a) => a.address))], pinned: false };
    },
  });
}
