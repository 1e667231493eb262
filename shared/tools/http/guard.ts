/**
 * The SSRF guard at connect time. Every new connection resolves the host itself, checks every
 * address it got, and connects to those exact addresses: a name cannot pass the check with
 * one address and connect with another (DNS rebinding), and every redirect hop to a new origin
 * opens a new connection, so it is checked the same way.
 */
import { isIP } from 'node:net';
import type { Agent, buildConnector } from 'undici';
import { loadUndici } from './undici';
import { ToolError } from '../../protocol/errors';
import { classifyAddress, classifyHostname } from './address-class';
import type { EgressGate, HttpPolicy } from './policy';

const HINT = 'operators can allow it with TOOLGATE_HTTP_ALLOW';

/** A destination the guard refused; a ToolError so the model reads the sentence. */
export class RefusedDestination extends ToolError {}

/** URL host spelling → the form the guard compares: no IPv6 brackets, lower case, no trailing dot. */
export function normalizeHost(hostname: string): string {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  return bare.toLowerCase().replace(/\.$/, '');
}

const byEgress = (host: string, port: number, reason: string) =>
  new RefusedDestination(`Refused: ${host.includes(':') ? `[${host}]` : host}:${port}: ${reason} (the egress policy http_request shares with the sandbox)`);

/**
 * Resolves `hostname` and checks each address against the policy. Returns the addresses to
 * connect to, in order; throws RefusedDestination if any of them is forbidden, so a name with
 * one public and one private address is refused rather than half-trusted. With a tenant's egress
 * `gate`, names resolve through its pins and every address must pass the gate as well.
 */
export async function vetDestination(policy: HttpPolicy, hostname: string, port: number, gate?: EgressGate): Promise<string[]> {
  const host = normalizeHost(hostname);
  const literal = isIP(host) !== 0;
  let pinned = false;
  if (gate) {
    pinned = gate.isPinned(host);
    const first = gate.decide({ host, port, pinned });
    if (!first.allowed) throw byEgress(host, port, first.reason);
  }
  const hostAllowed = !literal && policy.allowsHost(host, port);
  if (!literal && !hostAllowed) {
    const named = classifyHostname(host);
    if (named) throw new RefusedDestination(`Refused: ${host} is a ${named} host name, which is not allowed; ${HINT}`);
  }
  let addresses: string[];
  if (literal) addresses = [host];
  else {
    try {
      addresses = gate ? [...(await gate.resolve(host)).addresses] : (await policy.resolve(host)).map((a) => a.address);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new ToolError(`Could not resolve ${host}${code ? ` (${code})` : ''}`);
    }
    if (addresses.length === 0) throw new ToolError(`Could not resolve ${host}: no addresses`);
  }
  for (const address of gate ? addresses : []) {
    const verdict = gate!.decide({ host, port, address, pinned });
    if (!verdict.allowed) throw byEgress(host, port, verdict.reason);
  }
  if (hostAllowed) return addresses;
  for (const address of addresses) {
    if (policy.allowsAddress(address, port)) continue;
    const label = classifyAddress(address);
    if (label === undefined) continue;
    throw new RefusedDestination(
      literal ? `Refused: ${address} (${label}) is not allowed; ${HINT}` : `Refused: ${host} resolves to ${address} (${label}), which is not allowed; ${HINT}`,
    );
  }
  return addresses;
}

/** Connection failures after which the next address of the same host is worth trying. */
const TRY_NEXT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT']);

/** An undici Agent whose every connection goes through `vetDestination` first (with the tenant's egress gate, if any). */
export function guardedAgent(policy: HttpPolicy, gate?: EgressGate): Agent {
  const undici = loadUndici();
  const connectTo = undici.buildConnector(policy.upstreamTls ? { secureContext: policy.upstreamTls } : {});
  const connect: buildConnector.connector = (opts, callback) => {
    const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
    const host = normalizeHost(opts.hostname);
    // TLS must still verify the certificate against the name, not the address we dial.
    const servername = opts.servername || (isIP(host) === 0 ? host : undefined);
    const attempt = (addresses: string[], i: number): void => {
      connectTo({ ...opts, hostname: addresses[i] as string, servername }, (...result) => {
        const err = result[0];
        if (err && i + 1 < addresses.length && TRY_NEXT.has((err as NodeJS.ErrnoException).code ?? '')) {
          attempt(addresses, i + 1);
          return;
        }
        callback(...result);
      });
    };
    vetDestination(policy, host, port, gate).then(
      (addresses) => attempt(addresses, 0),
      (err: Error) => callback(err, null),
    );
  };
  return new undici.Agent({ connect });
}
