import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { loadConfig } from '../../shared/config';
import { DEFAULT_LIMITS, LIMIT_ENV } from '../../shared/limits';

test('every tool limit is set by its variable and documented in the README', async () => {
  const readme = await fs.readFile(path.join(__dirname, '../../README.md'), 'utf8');
  for (const [key, variable] of Object.entries(LIMIT_ENV) as Array<[keyof typeof LIMIT_ENV, string]>) {
    expect(loadConfig({ [variable]: '12345' }, '/tmp').limits[key]).toBe(12345);
    expect(readme).toContain(`| \`${variable}\` | ${DEFAULT_LIMITS[key]} |`);
  }
});

test("run_command's hard output cap defaults to 64 MiB", () => {
  expect(loadConfig({}, '/tmp').limits.maxCommandOutputBytes).toBe(64 * 1024 * 1024);
});
