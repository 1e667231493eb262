/**
 * The sandbox backends' registry: every backend is found by its id and nowhere else, an unknown
 * or duplicate id fails at start with a sentence, and every registered backend has its contract
 * test file beside this one (adding a backend = its module + one registry line + that file).
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { noneModule } from '../../executor/sandbox/none';
import { createRegistry, SANDBOX_BACKENDS } from '../../executor/sandbox/registry';
import { ConfigError, loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/log';

test('lists none, bwrap and docker, once each', () => {
  expect(SANDBOX_BACKENDS.ids).toEqual(['none', 'bwrap', 'docker']);
});

test('an unknown id fails with a sentence naming the setting and every registered id', () => {
  expect(() => SANDBOX_BACKENDS.get('chroot')).toThrow(ConfigError);
  expect(() => SANDBOX_BACKENDS.get('chroot')).toThrow('TOOLGATE_SANDBOX must be one of none, bwrap, docker, got "chroot"');
  expect(() => SANDBOX_BACKENDS.get('', '--sandbox')).toThrow('--sandbox must be one of none, bwrap, docker, got ""');
  expect(SANDBOX_BACKENDS.find('chroot')).toBeUndefined();
});

test('a duplicate id fails when the list is made, with a sentence naming it', () => {
  expect(() => createRegistry([noneModule, { ...noneModule }])).toThrow(
    'two sandbox backends are registered with the id "none": each id must name exactly one module',
  );
});

test.each(SANDBOX_BACKENDS.ids)('%s has its contract test file', (id) => {
  expect(existsSync(path.join(__dirname, `sandbox-${id}.test.ts`))).toBe(true);
});

test.each(SANDBOX_BACKENDS.ids)('%s creates a backend of its own name from its section of the config', async (id) => {
  const module = SANDBOX_BACKENDS.get(id);
  const config = loadConfig({ TOOLGATE_SANDBOX: id }, '/tmp');
  const backend = module.create(module.section(config), { role: 'stdio', log: createLogger('silent', 'test') });
  expect(backend.name).toBe(id);
  await backend.close?.();
});
