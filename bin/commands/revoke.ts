/**
 * `toolgate revoke --id ID [--before ISO|now]`: every token of that identity issued before the
 * given time is refused from then on, by every gateway on the bus. `--issuer URL --sub SUB` names
 * an OAuth tenant instead (its key: shared/auth/oauth-tenant.ts); its access tokens are refused
 * by `iat` the same way, and one without `iat` is refused outright once its tenant is revoked. The cut-off is stored on
 * the bus's Redis, so it needs TOOLGATE_REDIS_URL; an embedded `toolgate serve` keeps its
 * revocations in its own memory, which no other process can reach.
 */
import { oauthTenant } from '../../shared/auth/oauth-tenant';
import { createBus } from '../../shared/bus/index';
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';
import { parseFlags, UsageError } from '../flags';
import type { Command } from './command';

export const REVOKE_USAGE = `Usage: toolgate revoke --id ID [--before ISO|now]
       toolgate revoke --issuer URL --sub SUB [--before ISO|now]

  --id ID        the identity (the token's "id") whose tokens to revoke
  --issuer URL   with --sub: an OAuth tenant, by its issuer (exactly as in TOOLGATE_OAUTH_ISSUERS)
  --sub SUB      and its subject (the access token's "sub", or TOOLGATE_OAUTH_SUBJECT_CLAIM)
  --before WHEN  revoke tokens issued before this time: "now" (default) or an ISO 8601 time
                 such as 2026-01-31T12:00:00Z

Tokens carry their issue time in whole seconds, so the cut-off is rounded up to the next second:
a token issued later within that same second is refused too. Needs the gateways' Redis
(TOOLGATE_REDIS_URL, TOOLGATE_REDIS_SENTINELS or TOOLGATE_REDIS_CLUSTER_NODES).`;

/** The cut-off in epoch seconds: tokens whose `iat` is below it are refused. */
export function revocationCutoff(before: string, nowMs: number = Date.now()): number {
  const ms = before === 'now' ? nowMs : parseIsoTime(before);
  return Math.ceil(ms / 1000);
}

function parseIsoTime(text: string): number {
  // A full date, optionally with a time; Date.parse alone accepts looser forms ("1", "May 5").
  if (!/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(text)) {
    throw new UsageError(`--before must be "now" or an ISO 8601 time such as 2026-01-31T12:00:00Z, got "${text}"`);
  }
  const ms = Date.parse(text);
  if (!Number.isFinite(ms) || ms <= 0) throw new UsageError(`--before is not a valid time: "${text}"`);
  return ms;
}

/** The tenant key to revoke: --id, or --issuer with --sub (never both). */
function tenantOf(flags: ReturnType<typeof parseFlags>): string {
  const id = flags.get('id');
  const issuer = flags.get('issuer');
  const sub = flags.get('sub');
  if (issuer !== undefined || sub !== undefined) {
    if (id !== undefined) throw new UsageError('give either --id, or --issuer with --sub, not both');
    if (typeof issuer !== 'string' || typeof sub !== 'string' || issuer === '' || sub === '') {
      throw new UsageError('--issuer and --sub go together: the OAuth tenant whose tokens to revoke');
    }
    return oauthTenant(issuer, sub);
  }
  if (typeof id !== 'string') throw new UsageError('--id (or --issuer with --sub) is required: the identity whose tokens to revoke');
  return id;
}

export async function runRevoke(argv: readonly string[], config: Readonly<Config>, log: Logger): Promise<number> {
  const flags = parseFlags(argv, { values: ['id', 'before', 'issuer', 'sub'] });
  const id = tenantOf(flags);
  const cutoff = revocationCutoff((flags.get('before') as string | undefined) ?? 'now');
  if (!config.redis) {
    throw new Error(
      "toolgate revoke needs TOOLGATE_REDIS_URL (or TOOLGATE_REDIS_SENTINELS / TOOLGATE_REDIS_CLUSTER_NODES): revocations are stored on the bus's Redis. A `toolgate serve` without " +
        "Redis keeps them in its own memory, which this command cannot reach; run it with the gateways' Redis settings, or change " +
        'the signing secret to invalidate every token.',
    );
  }
  const bus = await createBus(config, log);
  try {
    await bus.revocations.revoke(id, cutoff);
  } finally {
    await bus.close();
  }
  log.info({ id, notBefore: cutoff }, 'tokens revoked');
  process.stdout.write(`revoked: tokens of ${JSON.stringify(id)} issued before ${new Date(cutoff * 1000).toISOString()} are refused\n`);
  return 0;
}

export const revokeCommand: Command = { summary: 'revoke every token of an identity issued before now', usage: REVOKE_USAGE, run: runRevoke };
