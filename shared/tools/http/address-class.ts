/**
 * The SSRF guard's classification: which IP addresses and host names http_request must never
 * reach unless an operator allows them. Pure functions, no I/O, so every range can be tested
 * without a network.
 */
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

type V4Range = readonly [ipaddr.IPv4, number, string];
type V6Range = readonly [ipaddr.IPv6, number, string];

const v4 = (cidr: string, label: string): V4Range => [...ipaddr.IPv4.parseCIDR(cidr), label];
const v6 = (cidr: string, label: string): V6Range => [...ipaddr.IPv6.parseCIDR(cidr), label];

// Order matters: the first match names the address, so specific entries (metadata) come first.
const V4: readonly V4Range[] = [
  v4('169.254.169.254/32', 'cloud metadata'),
  v4('169.254.170.2/32', 'cloud metadata'),
  v4('100.100.100.200/32', 'cloud metadata'),
  v4('0.0.0.0/8', 'unspecified ("this network")'),
  v4('10.0.0.0/8', 'private'),
  v4('100.64.0.0/10', 'shared (carrier-grade NAT)'),
  v4('127.0.0.0/8', 'loopback'),
  v4('169.254.0.0/16', 'link-local'),
  v4('172.16.0.0/12', 'private'),
  v4('192.0.0.0/24', 'IETF protocol assignments'),
  v4('192.0.2.0/24', 'documentation'),
  v4('192.88.99.0/24', '6to4 relay anycast'),
  v4('192.168.0.0/16', 'private'),
  v4('198.18.0.0/15', 'benchmarking'),
  v4('198.51.100.0/24', 'documentation'),
  v4('203.0.113.0/24', 'documentation'),
  v4('224.0.0.0/4', 'multicast'),
  v4('255.255.255.255/32', 'broadcast'),
  v4('240.0.0.0/4', 'reserved'),
];

const V6: readonly V6Range[] = [
  v6('::/128', 'unspecified'),
  v6('::1/128', 'loopback'),
  v6('fd00:ec2::254/128', 'cloud metadata'),
  v6('fc00::/7', 'unique-local'),
  v6('fe80::/10', 'link-local'),
  v6('fec0::/10', 'site-local'),
  v6('ff00::/8', 'multicast'),
  v6('2001:db8::/32', 'documentation'),
  v6('100::/64', 'discard-only'),
  v6('2001::/32', 'Teredo tunnel'),
  v6('64:ff9b:1::/48', 'local-use NAT64'),
];

/** IPv6 forms that carry an IPv4 address; the embedded address decides. `at` is its first 16-bit part. */
const EMBEDDING: ReadonlyArray<readonly [V6Range, number]> = [
  [v6('::ffff:0:0/96', 'IPv4-mapped'), 6],
  [v6('::ffff:0:0:0/96', 'IPv4-translated'), 6],
  [v6('64:ff9b::/96', 'NAT64'), 6],
  [v6('::/96', 'IPv4-compatible'), 6],
  [v6('2002::/16', '6to4'), 1],
];

/**
 * Parses a literal IP address (IPv6 with or without brackets or a zone), or returns undefined.
 * IPv6 with a dotted tail goes through the WHATWG parser first: ipaddr.js reads the deprecated
 * `::a.b.c.d` as `::ffff:a.b.c.d`, which is a different address.
 */
export function parseIp(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  const bracketless = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  let bare = bracketless.split('%')[0] ?? '';
  const family = isIP(bare);
  if (family === 0) return undefined;
  if (family === 6 && bare.includes('.')) bare = new URL(`http://[${bare}]/`).hostname.slice(1, -1);
  return ipaddr.parse(bare);
}

function classifyV4(addr: ipaddr.IPv4): string | undefined {
  return V4.find(([net, bits]) => addr.match(net, bits))?.[2];
}

/**
 * Names the forbidden range `address` falls in ("loopback", "private", "cloud metadata", …),
 * or returns undefined for an ordinary public address. Anything that is not a literal IP
 * address is reported as unrecognised, so it is refused too.
 */
export function classifyAddress(address: string): string | undefined {
  const addr = parseIp(address);
  if (addr === undefined) return 'not a recognised IP address';
  if (addr.kind() === 'ipv4') return classifyV4(addr as ipaddr.IPv4);
  const six = addr as ipaddr.IPv6;
  const own = V6.find(([net, bits]) => six.match(net, bits))?.[2];
  if (own) return own;
  for (const [[net, bits, form], at] of EMBEDDING) {
    if (!six.match(net, bits)) continue;
    const hi = six.parts[at] ?? 0;
    const lo = six.parts[at + 1] ?? 0;
    const four = new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
    const inner = classifyV4(four);
    return inner ? `${inner}, as ${form} ${four.toString()}` : undefined;
  }
  return undefined;
}

/** Names that reach cloud metadata services; refused before any DNS query is made. */
const METADATA_NAMES: ReadonlySet<string> = new Set([
  'metadata',
  'metadata.google.internal',
  'metadata.goog',
  'metadata.azure.internal',
  'instance-data',
  'instance-data.ec2.internal',
]);

/** Names a forbidden host name (already lower-cased, without a trailing dot), or undefined. */
export function classifyHostname(host: string): string | undefined {
  return METADATA_NAMES.has(host) ? 'cloud metadata' : undefined;
}
