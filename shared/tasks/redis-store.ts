/**
 * Tasks in Redis, for the BullMQ deployment: durable across gateway restarts and answered by any
 * gateway replica. One JSON value per task (`toolgate:task:<id>`, expiring with the task's TTL),
 * a per-tenant index by creation time for tasks/list, and a per-tenant set of working tasks for
 * the live-task limit. State changes are Lua scripts, so two processes racing (the executor and
 * the gateway both finishing a task, a cancel arriving as it finishes) leave one consistent end.
 * Keys start with the keyspace's prefix (`toolgate:`, on a Cluster `{toolgate}:`, one hash slot,
 * as the scripts touch keys they find inside: redis-connections.ts `redisKeyspace`).
 */
import type { RedisClient } from '../bus/redis-connections';
import { BadCursor, TaskOutcome, TaskPage, TaskRecord, TaskStore } from './task-store';

/*
 * A task is a hash: `task` holds its small JSON fields (ids, status, times: no arrays, so Lua's
 * cjson round-trips them exactly) and `outcome` the result or error, a string Lua never parses.
 */

/**
 * KEYS: task, index, live. ARGV: task json, ttlMs, maxLive, createdAt, id, task-key prefix.
 * Working tasks whose key expired are dropped first.
 */
const CREATE = `
for _, id in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  if redis.call('EXISTS', ARGV[6] .. id) == 0 then redis.call('SREM', KEYS[3], id) end
end
if redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'task', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return 1`;

/**
 * KEYS: task. ARGV: new status ('' keeps it), status message ('' keeps it), outcome ('' none),
 * now, live-set prefix. Changes only a `working` task (an ended one keeps its end) and takes an
 * ended task out of its tenant's live set. Returns the task's fields as they now are, or false.
 */
const UPDATE = `
local raw = redis.call('HGET', KEYS[1], 'task')
if not raw then return false end
local task = cjson.decode(raw)
if task.status ~= 'working' then return raw end
if ARGV[1] ~= '' then task.status = ARGV[1] end
if ARGV[2] ~= '' then task.statusMessage = ARGV[2] end
task.lastUpdatedAt = tonumber(ARGV[4])
local out = cjson.encode(task)
redis.call('HSET', KEYS[1], 'task', out)
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'outcome', ARGV[3]) end
if task.status ~= 'working' then redis.call('SREM', ARGV[5] .. task.tenant, task.taskId) end
return out`;

type Fields = Omit<TaskRecord, 'result' | 'error'>;

export class RedisTaskStore implements TaskStore {
  private readonly taskPrefix: string;
  private readonly indexPrefix: string;
  private readonly livePrefix: string;

  /** `prefix`: the keyspace's (redis-connections.ts `redisKeyspace`), `toolgate:` unless on a Cluster. */
  constructor(
    private readonly redis: RedisClient,
    private readonly now: () => number = Date.now,
    prefix = 'toolgate:',
  ) {
    this.taskPrefix = `${prefix}task:`;
    this.indexPrefix = `${prefix}tasks:`;
    this.livePrefix = `${prefix}tasks-live:`;
  }

  async create(task: TaskRecord, maxLive: number): Promise<boolean> {
    const { result: _r, error: _e, ...fields } = task;
    const created = await this.redis.eval(
      CREATE,
      3,
      this.taskPrefix + task.taskId,
      this.indexPrefix + task.tenant,
      this.livePrefix + task.tenant,
      JSON.stringify(fields),
      String(task.ttlMs),
      String(maxLive),
      String(task.createdAt),
      task.taskId,
      this.taskPrefix,
    );
    return created === 1;
  }

  async get(tenant: string, taskId: string): Promise<TaskRecord | undefined> {
    const [raw, outcome] = await this.redis.hmget(this.taskPrefix + taskId, 'task', 'outcome');
    return assemble(raw ?? null, outcome ?? null, tenant);
  }

  async note(taskId: string, statusMessage: string): Promise<void> {
    await this.update(taskId, '', statusMessage, '');
  }

  async finish(taskId: string, outcome: TaskOutcome): Promise<void> {
    if ('result' in outcome) await this.update(taskId, 'completed', '', JSON.stringify(outcome));
    else await this.update(taskId, 'failed', outcome.error.message || 'failed', JSON.stringify(outcome));
  }

  async cancel(tenant: string, taskId: string): Promise<TaskRecord | undefined> {
    // Read first: another tenant's task must not be touched, not even cancelled.
    if (!(await this.get(tenant, taskId))) return undefined;
    await this.update(taskId, 'cancelled', 'The task was cancelled by request.', '');
    return this.get(tenant, taskId);
  }

  async list(tenant: string, cursor: string | undefined, limit: number): Promise<TaskPage> {
    const start = cursor === undefined ? 0 : Number(cursor);
    if (!Number.isSafeInteger(start) || start < 0 || String(start) !== (cursor ?? '0')) throw new BadCursor('invalid cursor');
    const ids = await this.redis.zrevrange(this.indexPrefix + tenant, start, start + limit);
    const page = ids.slice(0, limit);
    const tasks: TaskRecord[] = [];
    const gone: string[] = [];
    for (const id of page) {
      const [raw, outcome] = await this.redis.hmget(this.taskPrefix + id, 'task', 'outcome');
      const task = assemble(raw ?? null, outcome ?? null, tenant);
      if (task) tasks.push(task);
      else gone.push(id);
    }
    if (gone.length > 0) await this.redis.zrem(this.indexPrefix + tenant, ...gone);
    return ids.length > limit ? { tasks, nextCursor: String(start + limit - gone.length) } : { tasks };
  }

  private async update(taskId: string, status: string, statusMessage: string, outcome: string): Promise<void> {
    await this.redis.eval(UPDATE, 1, this.taskPrefix + taskId, status, statusMessage, outcome, String(this.now()), this.livePrefix);
  }
}

function assemble(raw: string | null, outcome: string | null, tenant: string): TaskRecord | undefined {
  if (raw === null) return undefined;
  try {
    const fields = JSON.parse(raw) as Fields;
    if (fields.tenant !== tenant) return undefined;
    const task: TaskRecord = { ...fields };
    if (outcome !== null) Object.assign(task, JSON.parse(outcome) as TaskOutcome);
    return task;
  } catch {
    return undefined;
  }
}
