/**
 * The grammar of egress rules (TOOLGATE_EGRESS_ALLOW / _DENY and `toolgate egress set`), parsed
 * once into matchers. Comma-separated; each rule is one of:
 *
 *   example.com          that name exactly
 *   *.example.com        strict subdomains of it (a.example.com, a.b.example.com), never
 *                        example.com itself, evilexample.com or example.com.evil.example
 *   203.0.113.7, ::1     that address (IPv6 may be written [::1])
 *   10.0.0.0/8, fd00::/8 every address in the network
 *
 * each optionally followed by `:PORT` (`example.com:22`, `[::1]:8080`, `10.0.0.0/8:5432`,
 * `fd00::/8:443`); a rule without a port means ports 80 and 443. A bare IPv6 address takes no
 * port (`::1:8080` is an address): write `[::1]:8080`. Host names are compared the way request
 * URLs spell them (lower case, IDN as punycode, no trailing dot); IPv4-mapped IPv6 matches its
 * IPv4 form. A bad rule throws EgressRuleError naming it.
 */
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { parseIp } from '../../shared/tools/http/address-class';

/** The ports a rule without `:PORT` covers. */
export const DEFAULT_PORTS: readonly number[] = Object.freeze([80, 443]);

type Address = ipaddr.IPv4 | ipaddr.IPv6;

interface RuleBase {
  /** The rule as written (trimmed), for `egress show` and messages. */
  readonly text: string;
  readonly ports: readonly number[];
}
/** One parsed rule: a name, a subdomain wildcard, or a network (an address is a /32 or /128). */
export type EgressRule =
  | (RuleBase & { readonly kind: 'host'; readonly host: string })
  | (RuleBase & { readonly kind: 'subdomains'; readonly suffix: string })
  | (RuleBase & { readonly kind: 'network'; readonly net: Address; readonly bits: number });

/** A rule that does not parse; the message names the rule and where it came from. */
export class EgressRuleError extends Error {
  override readonly name = 'EgressRuleError';
}

const NAME = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;
const GRAMMAR = 'expected host, *.host, host:port, IP, IP:port ([v6]:port), CIDR or CIDR:port';

/** An address with IPv4-mapped IPv6 turned into IPv4, so either spelling matches a rule. */
export function unmappedIp(address: string): Address | undefined {
  const addr = parseIp(address);
  return addr?.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() ? (addr as ipaddr.IPv6).toIPv4Address() : addr;
}

/**
 * A request's host as rules compare it: lower case, punycode, no brackets or trailing dot, IPv4
 * shorthand (`0x7f.1`) spelled out. Undefined for anything that is neither a name nor an address.
 */
export function normalizeTargetHost(raw: string): string | undefined {
  let host: string;
  try {
    host = new URL(`http://${raw.includes(':') && !raw.startsWith('[') ? `[${raw}]` : raw}/`).hostname;
  } catch {
    return undefined;
  }
  if (host.startsWith('[')) return host.slice(1, -1);
  host = host.replace(/\.$/, '');
  return isIP(host) === 4 || NAME.test(host) ? host : undefined;
}

function parsePort(text: string | undefined, fail: (why: string) => never): readonly number[] {
  if (text === undefined) return DEFAULT_PORTS;
  const port = Number(text);
  if (!/^\d{1,5}$/.test(text) || port < 1 || port > 65535) fail(`the port must be a number from 1 to 65535, got "${text}"`);
  return Object.freeze([port]);
}

function network(text: string, addrText: string, bitsText: string | undefined, ports: readonly number[], fail: (why: string) => never): EgressRule {
  const addr = parseIp(addrText);
  if (!addr) fail(`"${addrText}" is not an IP address`);
  const max = addr.kind() === 'ipv4' ? 32 : 128;
  const bits = bitsText === undefined ? max : Number(bitsText);
  if (bitsText !== undefined && (!/^\d{1,3}$/.test(bitsText) || bits > max)) fail(`the prefix length must be 0 to ${max}, got "${bitsText}"`);
  const six = addr as ipaddr.IPv6;
  if (addr.kind() === 'ipv6' && six.isIPv4MappedAddress() && bits >= 96) {
    return { kind: 'network', text, ports, net: six.toIPv4Address(), bits: bits - 96 };
  }
  return { kind: 'network', text, ports, net: addr, bits };
}

/** Parses one rule; `source` names where it came from (a variable or a flag) in errors. */
export function parseRule(raw: string, source = 'egress rule'): EgressRule {
  const text = raw.trim();
  const fail = (why: string): never => {
    throw new EgressRuleError(`${source}: "${text}" is not a valid rule (${why}); ${GRAMMAR}`);
  };
  if (text === '') fail('it is empty');
  if (text.includes('://')) fail('write the host without a scheme or path');
  const bracketed = /^\[([^\]]+)\](?::([^:]*))?$/.exec(text);
  if (bracketed) {
    const [addr = '', bits] = (bracketed[1] ?? '').split('/');
    if (isIP(addr) !== 6) fail('only an IPv6 address or network goes in brackets');
    return network(text, addr, bits, parsePort(bracketed[2], fail), fail);
  }
  const cidr = /^([^/]+)\/([^:]*)(?::([^:]*))?$/.exec(text);
  if (cidr) return network(text, cidr[1] ?? '', cidr[2] ?? '', parsePort(cidr[3], fail), fail);
  if (isIP(text) === 6) return network(text, text, undefined, DEFAULT_PORTS, fail);
  const hostPort = /^([^:]+)(?::([^:]*))?$/.exec(text);
  if (!hostPort) fail('too many colons; an IPv6 address with a port goes in brackets: [address]:port');
  const ports = parsePort(hostPort?.[2], fail);
  const hostText = hostPort?.[1] ?? '';
  const wildcard = hostText.startsWith('*.');
  const host = normalizeTargetHost(wildcard ? hostText.slice(2) : hostText);
  if (host === undefined || host.includes('*')) fail(`"${hostText}" is not a host name, *.name or IP address`);
  if (isIP(host as string) !== 0) {
    if (wildcard) fail('a wildcard takes a name, not an address');
    return network(text, host as string, undefined, ports, fail);
  }
  return wildcard ? { kind: 'subdomains', text, ports, suffix: `.${host}` } : { kind: 'host', text, ports, host: host as string };
}

/** Parses a comma-separated list (or a list of such strings); empty items are skipped. */
export function parseRules(input: string | readonly string[], source?: string): readonly EgressRule[] {
  const items = (typeof input === 'string' ? [input] : input).flatMap((s) => s.split(','));
  return Object.freeze(items.filter((s) => s.trim() !== '').map((s) => Object.freeze(parseRule(s, source))));
}

/** True when a name rule covers `host` (normalized, not an address) on `port`. */
export function ruleMatchesName(rule: EgressRule, host: string, port: number): boolean {
  if (!rule.ports.includes(port)) return false;
  if (rule.kind === 'host') return rule.host === host;
  return rule.kind === 'subdomains' && host.length > rule.suffix.length && host.endsWith(rule.suffix);
}

/** True when a network rule holds `address` and covers `port`. */
export function ruleMatchesAddress(rule: EgressRule, address: string, port: number): boolean {
  if (rule.kind !== 'network' || !rule.ports.includes(port)) return false;
  const addr = unmappedIp(address);
  return addr !== undefined && addr.kind() === rule.net.kind() && addr.match(rule.net, rule.bits);
}

/** The rules as a comma-separated list, as they were written. */
export function formatRules(rules: readonly EgressRule[]): string {
  return rules.map((r) => r.text).join(',');
}
