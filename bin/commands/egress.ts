/**
 * `toolgate egress set|show|clear --id ID`: a tenant's own egress policy, which replaces the
 * default (TOOLGATE_EGRESS_ALLOW / _DENY) for that tenant and applies to its next connection.
 * Stored on Redis when TOOLGATE_REDIS_URL is set (every executor reads it there), else in the
 * data directory (an embedded `toolgate serve` reads it there).
 */
import type { Config } from '../../shared/config';
import { closeConnection, failFastConnection, waitReady } from '../../shared/bus/redis-connections';
import { describeRedis } from '../../shared/redis-config';
import type { Logger } from '../../shared/log';
import { egressFromConfig } from '../../executor/egress/index';
import { EgressPolicyStore, filePolicyStore, redisPolicyStore } from '../../executor/egress/policy-store';
import { EgressRuleError, formatRules } from '../../executor/egress/rules';
import { parseFlags, UsageError } from '../flags';
import type { Command } from './command';

export const EGRESS_USAGE = `Usage: toolgate egress set --id ID --allow RULES [--deny RULES]
       toolgate egress show --id ID
       toolgate egress clear --id ID

  set    give the tenant its own policy; it REPLACES the default (TOOLGATE_EGRESS_ALLOW and
         TOOLGATE_EGRESS_DENY) for that tenant, deny list included. --allow none: no egress.
  show   print the rules in force for the tenant (its own, or the default with a note)
  clear  remove the tenant's own policy: the default applies again

RULES, comma-separated: host, *.host (subdomains only), host:port, IP, IP:port ([v6]:port),
CIDR, CIDR:port. A rule without a port means 80 and 443. Deny wins over allow. A host-name rule
never opens a private, loopback, link-local or metadata address; an IP or CIDR rule can.
Changes apply to the tenant's next connection. Stored on Redis with TOOLGATE_REDIS_URL, else in
the data directory (TOOLGATE_DATA_DIR).`;

const REDIS_READY_MS = 5000;

async function withStore<T>(config: Readonly<Config>, use: (store: EgressPolicyStore) => Promise<T>): Promise<T> {
  if (!config.redis) return use(filePolicyStore(config.dataDir));
  const redis = failFastConnection(config.redis, 'toolgate-egress-cli');
  redis.on('error', () => undefined);
  try {
    await waitReady(redis, config.redis, REDIS_READY_MS);
    return await use(redisPolicyStore(redis));
  } finally {
    await closeConnection(redis);
  }
}

export async function runEgress(argv: readonly string[], config: Readonly<Config>, log: Logger): Promise<number> {
  const [action, ...rest] = argv;
  if (action !== 'set' && action !== 'show' && action !== 'clear') {
    throw new UsageError(`egress needs an action: set, show or clear${action ? `, got "${action}"` : ''}`);
  }
  const flags = parseFlags(rest, { values: action === 'set' ? ['id', 'allow', 'deny'] : ['id'] });
  const id = flags.get('id');
  if (typeof id !== 'string') throw new UsageError('--id is required: the identity (tenant) whose egress policy this is');
  const where = config.redis ? describeRedis(config.redis) : `${config.dataDir}`;
  const out = (text: string) => process.stdout.write(text + '\n');

  if (action === 'set') {
    const allow = flags.get('allow');
    if (typeof allow !== 'string') throw new UsageError('--allow is required (rules, or "none" for no egress)');
    let stored;
    try {
      stored = await withStore(config, (s) => s.set(id, { allow: allow === 'none' ? '' : allow, deny: (flags.get('deny') as string | undefined) ?? '' }));
    } catch (err) {
      if (err instanceof EgressRuleError) throw new UsageError(err.message);
      throw err;
    }
    log.info({ id, allow: stored.allow, deny: stored.deny }, 'egress policy set');
    out(`set: ${JSON.stringify(id)} now has its own egress policy (replacing the default), in ${where}`);
    out(`allow: ${stored.allow || '(none: no egress)'}`);
    out(`deny: ${stored.deny}`);
    return 0;
  }
  if (action === 'clear') {
    const had = await withStore(config, (s) => s.clear(id));
    if (had) log.info({ id }, 'egress policy cleared');
    out(had ? `cleared: ${JSON.stringify(id)} follows the default egress policy again` : `${JSON.stringify(id)} had no policy of its own; the default applies`);
    return 0;
  }
  const stored = await withStore(config, (s) => s.get(id));
  if (stored) {
    out(`allow: ${stored.allow}`);
    out(`deny: ${stored.deny}`);
    process.stderr.write(`note: ${JSON.stringify(id)}'s own policy, set ${stored.updatedAt}; it replaces the default\n`);
    return 0;
  }
  const { defaults } = egressFromConfig(config.egress);
  out(`allow: ${formatRules(defaults.allow)}`);
  out(`deny: ${formatRules(defaults.deny)}`);
  process.stderr.write(
    `note: ${JSON.stringify(id)} has no policy of its own: the default applies (TOOLGATE_EGRESS_ALLOW / TOOLGATE_EGRESS_DENY)${defaults.allow.length === 0 ? '; it allows no egress' : ''}\n`,
  );
  return 0;
}

export const egressCommand: Command = { summary: "set, show or clear a tenant's egress policy", usage: EGRESS_USAGE, run: runEgress };
