/** TOOLGATE_MAX_PROCESSES_PER_IDENTITY: parsed once, its default follows the settings it is made of. */
import { loadConfig } from '../../shared/config';

const budget = (env: Record<string, string>) => loadConfig(env, '/tmp').executor.maxProcessesPerIdentity;

test('defaults to a full sandbox process table plus a run_command per bus slot; explicit values win; bad ones stop start-up', () => {
  expect(budget({})).toBe(16 + 4);
  expect(budget({ TOOLGATE_MAX_PROCESSES: '8', TOOLGATE_TENANT_CONCURRENCY: '2' })).toBe(10);
  expect(budget({ TOOLGATE_EXECUTOR_CONCURRENCY: '32' })).toBe(16 + 8);
  expect(budget({ TOOLGATE_MAX_PROCESSES_PER_IDENTITY: '3' })).toBe(3);
  expect(() => budget({ TOOLGATE_MAX_PROCESSES_PER_IDENTITY: '0' })).toThrow(/TOOLGATE_MAX_PROCESSES_PER_IDENTITY/);
  expect(() => budget({ TOOLGATE_MAX_PROCESSES_PER_IDENTITY: 'lots' })).toThrow(/TOOLGATE_MAX_PROCESSES_PER_IDENTITY/);
});
