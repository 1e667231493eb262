/**
 * Governed egress, host side: the public face of executor/egress/. The executor builds the
 * shared parts once from its Config (`egressFromConfig`), then opens one channel per sandbox
 * (`openEgressChannel`) with a `policyLookup` over the tenant store.
 */
import type { EgressConfig } from '../../shared/config';
import type { EgressLimits } from './accounting';
import { egressPolicy, EgressPolicy } from './policy';
import { parsePins } from './resolver';
import { parseRules } from './rules';

export { createEgressAccounting, DEFAULT_EGRESS_LIMITS } from './accounting';
export type { EgressAccounting, EgressAccountingOptions, EgressLimits } from './accounting';
export type { EgressClosedEvent, EgressDeniedEvent, EgressEvent } from './events';
export { createEgressPolicy, egressPolicy } from './policy';
export type { EgressDecision, EgressPolicy, EgressTarget } from './policy';
export { filePolicyStore, policyLookup, redisPolicyStore } from './policy-store';
export type { EgressPolicyStore, PolicyLookup, StoredEgressPolicy } from './policy-store';
export { openEgressChannel } from './proxy';
export type { EgressChannel, EgressChannelOptions } from './proxy';
export { createEgressResolver, parsePins } from './resolver';
export type { EgressResolver } from './resolver';
export { EgressRuleError, parseRules } from './rules';

export interface EgressSettings {
  /** The policy of every tenant without its own. */
  defaults: EgressPolicy;
  pins: ReadonlyMap<string, string>;
  limits: EgressLimits;
}

/** Parses the egress variables; throws EgressRuleError naming the variable and the rule. Call at start-up. */
export function egressFromConfig(config: Readonly<EgressConfig>): EgressSettings {
  return {
    defaults: egressPolicy(parseRules(config.allow, 'TOOLGATE_EGRESS_ALLOW'), parseRules(config.deny, 'TOOLGATE_EGRESS_DENY')),
    pins: parsePins(config.resolve),
    limits: { maxConnections: config.maxConnectionsPerTenant, bytesPerDay: config.bytesPerDayPerTenant },
  };
}
