/**
 * An egress policy: allow rules and deny rules (executor/egress/rules.ts), deny wins. `decide`
 * is asked twice per connection: before resolving the name (so a name no rule could open is
 * refused without a DNS query) and then for every address the name resolved to, which is the
 * address the proxy connects to.
 *
 * The SSRF guard (shared/tools/http/address-class.ts) applies to every address: loopback,
 * private, link-local, metadata and the other special ranges are refused unless
 *  - an explicit IP or CIDR allow rule holds the address (the operator named it), or
 *  - the name is pinned (TOOLGATE_EGRESS_RESOLVE, the operator's decision) and a rule allows it.
 * A host-name rule alone never opens such an address, so DNS that answers with an internal
 * address (rebinding) gets nothing.
 */
import { isIP } from 'node:net';
import { classifyAddress, classifyHostname } from '../../shared/tools/http/address-class';
import { EgressRule, parseRules, ruleMatchesAddress, ruleMatchesName } from './rules';

/** One connection, as far as it is known. */
export interface EgressTarget {
  /** The host the client asked for: a normalized name or an IP address (normalizeTargetHost). */
  host: string;
  port: number;
  /** The address about to be connected to; absent for the check made before resolving. */
  address?: string;
  /** Whether `address` (or, before resolving, the name) comes from an operator's pin. */
  pinned?: boolean;
}

export type EgressDecision = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

export interface EgressPolicy {
  readonly allow: readonly EgressRule[];
  readonly deny: readonly EgressRule[];
  /** Allowed, or refused with a short reason ("not in this tenant's policy", "… a private address"). */
  decide(target: EgressTarget): EgressDecision;
}

/** Rules as text: a comma-separated string or a list of them. */
export interface EgressRulesText {
  allow: string | readonly string[];
  deny?: string | readonly string[];
}

export const NOT_IN_POLICY = "not in this tenant's policy";
export const DENIED_BY_POLICY = "denied by this tenant's policy";

const ALLOWED: EgressDecision = Object.freeze({ allowed: true });
const refuse = (reason: string): EgressDecision => Object.freeze({ allowed: false, reason });

/** Builds a policy from parsed rules. */
export function egressPolicy(allow: readonly EgressRule[], deny: readonly EgressRule[] = []): EgressPolicy {
  const addressRules = allow.filter((r) => r.kind === 'network');
  return Object.freeze({
    allow,
    deny,
    decide({ host, port, address, pinned = false }: EgressTarget): EgressDecision {
      const isName = isIP(host) === 0;
      const at = address ?? (isName ? undefined : host);
      if (isName && deny.some((r) => ruleMatchesName(r, host, port))) return refuse(DENIED_BY_POLICY);
      if (at !== undefined && deny.some((r) => ruleMatchesAddress(r, at, port))) return refuse(DENIED_BY_POLICY);
      const byName = isName && allow.some((r) => ruleMatchesName(r, host, port));
      if (isName && !pinned && classifyHostname(host)) return refuse(`${host} is a ${classifyHostname(host)} host name`);
      if (at === undefined) {
        // Before resolving: only an address rule on this port could still open an unnamed host.
        return byName || addressRules.some((r) => r.ports.includes(port)) ? ALLOWED : refuse(NOT_IN_POLICY);
      }
      const byAddress = allow.some((r) => ruleMatchesAddress(r, at, port));
      if (!byName && !byAddress) return refuse(NOT_IN_POLICY);
      const label = classifyAddress(at);
      if (label === undefined || byAddress || (byName && pinned)) return ALLOWED;
      return refuse(isName ? `${host} resolves to ${at}, a ${label} address` : `${at} is a ${label} address`);
    },
  });
}

/** Parses and builds a policy; `source` names where the rules came from in errors. */
export function createEgressPolicy(rules: EgressRulesText, source = 'egress'): EgressPolicy {
  return egressPolicy(parseRules(rules.allow, `${source} allow`), parseRules(rules.deny ?? [], `${source} deny`));
}
