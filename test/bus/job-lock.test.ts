/**
 * TOOLGATE_JOB_LOCK_MS: a running call's lock, renewed every second, so that a call outlives a
 * Redis outage shorter than the lock (the Sentinel failover test shows it end to end).
 */
import { DEFAULT_TUNING, lockTerms, workerOptions } from '../../shared/bus/bullmq-terms';
import { ConfigError, loadConfig } from '../../shared/config';

describe('the job lock', () => {
  it('defaults to 5000 ms and takes the variable', () => {
    expect(loadConfig({}).bus.jobLockMs).toBe(5000);
    expect(loadConfig({ TOOLGATE_JOB_LOCK_MS: '30000' }).bus.jobLockMs).toBe(30_000);
  });

  it('refuses a lock a one-second renewal could not keep', () => {
    expect(() => loadConfig({ TOOLGATE_JOB_LOCK_MS: '1500' })).toThrow(ConfigError);
    expect(() => loadConfig({ TOOLGATE_JOB_LOCK_MS: '1500' })).toThrow(/TOOLGATE_JOB_LOCK_MS must be at least 2000/);
  });

  it('is renewed every second whatever its length, so its margin is the outage a call survives', () => {
    expect(workerOptions({ ...DEFAULT_TUNING, lockDurationMs: 5000 })).toMatchObject({ lockDuration: 5000, lockRenewTime: 1000, maxStalledCount: 0 });
    expect(workerOptions({ ...DEFAULT_TUNING, lockDurationMs: 30_000 })).toMatchObject({ lockDuration: 30_000, lockRenewTime: 1000 });
    expect(workerOptions({ ...DEFAULT_TUNING, lockDurationMs: 2000 })).toMatchObject({ lockDuration: 2000, lockRenewTime: 1000 });
  });

  it('the gateway waits out an outage as long as the lock outlives it, so a call that survives is also answered', () => {
    expect(lockTerms(5000)).toEqual({ lockDurationMs: 5000, outageFailMs: 4000 });
    expect(lockTerms(10_000)).toEqual({ lockDurationMs: 10_000, outageFailMs: 9000 });
    expect(lockTerms(2000)).toEqual({ lockDurationMs: 2000, outageFailMs: 3000 });
  });
});
