/**
 * Per-tenant egress policies, set with `toolgate egress set|clear` and read by the proxy on
 * every new connection, so a change applies to the next connection without restarting
 * anything. There is no cache: a read is one Redis GET or one small file read.
 *
 * A tenant's own policy REPLACES the default (TOOLGATE_EGRESS_ALLOW / _DENY) entirely, deny
 * list included: what `egress show` prints is exactly what is in force. Clearing it returns
 * the tenant to the default.
 *
 * Stored in Redis (one key per tenant, `toolgate:egress:policy:<tenant>`) on a Redis
 * deployment, or in `<data dir>/egress-policies.json` for an embedded `serve` (rewritten
 * atomically: a new file renamed over the old one). Rules are validated before they are stored;
 * a stored policy that no longer parses refuses everything for its tenant (fail closed).
 */
import * as path from 'node:path';
import type { RedisClient } from '../../shared/bus/redis-connections';
import { jsonFile } from '../json-file';
import { createEgressPolicy, egressPolicy, EgressPolicy } from './policy';
import { formatRules, parseRules } from './rules';

/** A tenant's rules as stored: the rule texts, comma-joined, and when they were set. */
export interface StoredEgressPolicy {
  readonly allow: string;
  readonly deny: string;
  /** ISO 8601 time of the `set`. */
  readonly updatedAt: string;
}

export interface EgressPolicyStore {
  /** The tenant's own rules, or undefined when the default applies. */
  get(tenant: string): Promise<StoredEgressPolicy | undefined>;
  /** Validates and stores the tenant's rules (throws EgressRuleError naming a bad rule). */
  set(tenant: string, rules: { allow: string; deny?: string }): Promise<StoredEgressPolicy>;
  /** Removes the tenant's rules; resolves true if there were any. */
  clear(tenant: string): Promise<boolean>;
}

export const EGRESS_POLICY_KEY_PREFIX = 'toolgate:egress:policy:';
export const EGRESS_POLICY_FILE = 'egress-policies.json';

/** Parses the rules (for their errors) and spells them the one way they are stored. */
function validated(rules: { allow: string; deny?: string }, now: Date): StoredEgressPolicy {
  const allow = formatRules(parseRules(rules.allow, '--allow'));
  const deny = formatRules(parseRules(rules.deny ?? '', '--deny'));
  return Object.freeze({ allow, deny, updatedAt: now.toISOString() });
}

function fromJson(value: unknown): StoredEgressPolicy {
  const v = value as Partial<StoredEgressPolicy> | null;
  if (typeof v?.allow !== 'string' || typeof v.deny !== 'string') throw new Error('a stored egress policy is not {allow, deny}');
  return { allow: v.allow, deny: v.deny, updatedAt: String(v.updatedAt ?? '') };
}

/** The store on Redis; the client is the caller's (a fail-fast connection), never closed here. */
export function redisPolicyStore(redis: RedisClient, now: () => Date = () => new Date()): EgressPolicyStore {
  const key = (tenant: string) => EGRESS_POLICY_KEY_PREFIX + tenant;
  return {
    async get(tenant) {
      const raw = await redis.get(key(tenant));
      return raw === null ? undefined : fromJson(JSON.parse(raw));
    },
    async set(tenant, rules) {
      const stored = validated(rules, now());
      await redis.set(key(tenant), JSON.stringify(stored));
      return stored;
    },
    async clear(tenant) {
      return (await redis.del(key(tenant))) > 0;
    },
  };
}

/**
 * The store in the data directory: one JSON object `{tenant: {allow, deny, updatedAt}}`. Writes
 * from this process are serialized; two `egress set` processes at the same instant may lose one
 * update (the last rename wins), which the operator sees in `egress show`.
 */
export function filePolicyStore(dataDir: string, now: () => Date = () => new Date()): EgressPolicyStore {
  // A Map, not an object: a tenant may be called "__proto__".
  const file = jsonFile<Map<string, unknown>>(dataDir, EGRESS_POLICY_FILE, {
    parse(value) {
      if (typeof value !== 'object' || value === null || Array.isArray(value))
        throw new Error(`${path.join(dataDir, EGRESS_POLICY_FILE)} is not a JSON object`);
      return new Map(Object.entries(value));
    },
    empty: () => new Map(),
    serialize: (all) => Object.fromEntries(all),
  });
  const readAll = () => file.read();
  const update = <T>(change: (all: Map<string, unknown>) => T): Promise<T> => file.update(change);

  return {
    async get(tenant) {
      const all = await readAll();
      return all.has(tenant) ? fromJson(all.get(tenant)) : undefined;
    },
    async set(tenant, rules) {
      const stored = validated(rules, now());
      return update((all) => {
        all.set(tenant, stored);
        return stored;
      });
    },
    clear(tenant) {
      return update((all) => all.delete(tenant));
    },
  };
}

/** A policy that refuses everything, for a tenant whose stored rules cannot be read. */
const REFUSE_ALL = egressPolicy([], []);

/** What the proxy asks on each connection: the policy in force for a tenant and where it came from. */
export type PolicyLookup = (tenant: string) => Promise<{ policy: EgressPolicy; source: 'tenant' | 'default' | 'unreadable' }>;

/**
 * The tenant's own policy from the store, else `defaults`. A store that cannot be reached
 * rejects (the proxy refuses the connection); rules that no longer parse refuse everything.
 */
export function policyLookup(store: EgressPolicyStore, defaults: EgressPolicy): PolicyLookup {
  return async (tenant) => {
    const stored = await store.get(tenant);
    if (stored === undefined) return { policy: defaults, source: 'default' };
    try {
      return { policy: createEgressPolicy(stored, `tenant ${tenant}`), source: 'tenant' };
    } catch {
      return { policy: REFUSE_ALL, source: 'unreadable' };
    }
  };
}
