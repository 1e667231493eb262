/**
 * Where each tenant's workspace lives, recorded in Redis so that an executor taking over a shard
 * never serves a silently empty workspace. The key `{prefix}tenant:<tenant>:workspace` holds
 * the executor that first made it and its data directory's id (workspaces.ts: a random id kept
 * in the data directory, so executors sharing one share it). Before a tenant's first sandbox call
 * on an executor: no record → this executor's is written; the same data directory → the call
 * proceeds; another → the call is refused Unavailable (it did not run), naming the executor
 * whose data directory holds the workspace. Moving a tenant: docs/executor.md.
 */
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';
import type { RedisClient } from '../shared/bus/redis-connections';

/** Writes our record when there is none; returns the record in force either way. */
const CLAIM = `
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]`;

export interface WorkspaceHome {
  /** TOOLGATE_EXECUTOR_ID of the executor that made the workspace. */
  executor: string;
  /** The id of the data directory it is in. */
  dataDir: string;
}

export interface WorkspaceHomesOptions {
  client: RedisClient;
  /** toolgate's key prefix (redisKeyspace().prefix). */
  prefix: string;
  executorId: string;
  dataDirId: string;
}

export function workspaceHomeKey(prefix: string, tenant: string): string {
  return `${prefix}tenant:${tenant}:workspace`;
}

export class WorkspaceHomes {
  /** Tenants whose workspace is known to be here: checked once per executor run. */
  private readonly here = new Set<string>();
  private readonly mine: string;

  constructor(private readonly options: WorkspaceHomesOptions) {
    this.mine = JSON.stringify({ executor: options.executorId, dataDir: options.dataDirId } satisfies WorkspaceHome);
  }

  /** Resolves when `tenant`'s workspace is (or is now recorded) in this executor's data directory; rejects Unavailable otherwise. */
  async check(tenant: string): Promise<void> {
    if (this.here.has(tenant)) return;
    const { client, prefix, executorId, dataDirId } = this.options;
    let raw: unknown;
    try {
      raw = await client.eval(CLAIM, 1, workspaceHomeKey(prefix, tenant), this.mine);
    } catch (err) {
      throw new ProtocolError(
        ErrorCode.Unavailable,
        `Unavailable: could not look up where this identity's workspace lives (${(err as Error).message}); the call did not run`,
      );
    }
    const home = parseHome(raw);
    if (home && home.dataDir !== dataDirId) {
      throw new ProtocolError(
        ErrorCode.Unavailable,
        `Unavailable: this identity's workspace is in the data directory of executor "${home.executor}", which this executor ("${executorId}") cannot reach; the call did not run. Start executor "${home.executor}" again, or give the executors one data directory on shared storage (docs/executor.md)`,
      );
    }
    this.here.add(tenant);
  }
}

function parseHome(raw: unknown): WorkspaceHome | undefined {
  if (typeof raw !== 'string') return undefined;
  try {
    const value = JSON.parse(raw) as Partial<WorkspaceHome>;
    if (typeof value.executor === 'string' && typeof value.dataDir === 'string') return { executor: value.executor, dataDir: value.dataDir };
  } catch {
    // not ours: treated as no record
  }
  return undefined;
}
