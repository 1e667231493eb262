/**
 * The gateway's watchdog probe: in one Redis round trip, the state of every call it has waited on
 * for a while. A call whose job Redis lost, whose executor died (started, lock gone) or that
 * finished without its reply reaching the gateway is failed by the producer after two probes in
 * a row, so the caller learns it within seconds even when no executor is left to report it —
 * and whether the tool may have run, which only the gateway knows (see bullmq-producer.ts).
 */
import type { ProtocolError } from '../protocol/errors';
import { LOST_EXECUTOR, LOST_EXECUTOR_UNSTARTED, outcomeUnknown, unavailable } from './bullmq-terms';
import type { RedisClient } from './redis-connections';

/** Lost (no job), stalled (started, lock gone) or finished (reply should have come) — else ok. */
const PROBE_SCRIPT = `
local out = {}
for i = 1, #KEYS, 2 do
  local state = 'ok'
  if redis.call('EXISTS', KEYS[i]) == 0 then state = 'lost'
  else
    local f = redis.call('HMGET', KEYS[i], 'processedOn', 'finishedOn', 'defa')
    if f[2] then state = 'finished'
    elseif f[3] then state = 'stalled'
    elseif f[1] and redis.call('EXISTS', KEYS[i + 1]) == 0 then state = 'stalled' end
  end
  out[#out + 1] = state
end
return out`;

/** What the caller hears, by state, when the tool may have run and when it surely did not. */
const PROBE_ERRORS: Record<string, { ran: string; unstarted: string }> = {
  lost: {
    ran: 'the bus (Redis) lost this call after an executor took it (did Redis restart?); it may have run',
    unstarted: 'the bus (Redis) lost this call before any executor started it (did Redis restart?); it did not run',
  },
  stalled: { ran: LOST_EXECUTOR, unstarted: LOST_EXECUTOR_UNSTARTED },
  finished: {
    ran: 'the call ended but its reply was lost; it may have run',
    unstarted: 'an executor ended the call without starting it, and its reply was lost; it did not run',
  },
};

/** Each job's state, in order of their keys (`queue.toKey(id)`): 'ok', 'lost', 'stalled' or 'finished'. */
export async function probeJobs(cmd: RedisClient, jobKeys: readonly string[]): Promise<string[]> {
  const keys = jobKeys.flatMap((key) => [key, `${key}:lock`]);
  return (await cmd.eval(PROBE_SCRIPT, keys.length, ...keys)) as string[];
}

/**
 * What the caller of a call in `state` (not 'ok') is told: OutcomeUnknown when the tool may have
 * run (its executor was heard taking it), else Unavailable (it did not run; safe to retry).
 */
export function probeError(state: string, mayHaveRun: boolean): ProtocolError {
  const said = PROBE_ERRORS[state] ?? PROBE_ERRORS.stalled!;
  return mayHaveRun ? outcomeUnknown(said.ran) : unavailable(said.unstarted);
}
