/** Tenant ids are anything a token issuer wrote: their workspace names must stay inside and apart. */
import * as path from 'node:path';
import { TENANT_UID_BASE, TENANT_UID_SPAN, tenantUid, workspaceName } from '../../executor/tenant-names';

const HOSTILE = [
  '',
  '.',
  '..',
  '../x',
  '../../etc',
  'a/b',
  '/abs',
  'a\\b',
  'a\0b',
  '-rf',
  '--help',
  ' ',
  'x'.repeat(10_000),
  'CON',
  'nul',
  'a:b',
  '\uD800',
  '\uFFFD',
  'é',
  'e\u0301',
  'Alice',
  'alice',
  'ALICE',
  '%2e%2e',
  '.hidden',
  '~',
  '$HOME',
  '*',
  '\n',
];

describe('workspaceName', () => {
  it.each(HOSTILE.map((id) => [JSON.stringify(id).slice(0, 40), id]))('keeps %s to one safe path component', (_label, id) => {
    const name = workspaceName(id);
    expect(name).toMatch(/^[A-Za-z0-9_][A-Za-z0-9_-]*-[0-9a-f]{32}$/);
    expect(name.length).toBeLessThanOrEqual(65);
    const root = '/data/workspaces';
    expect(path.dirname(path.join(root, name))).toBe(root);
  });

  it('gives distinct ids distinct names, whatever sanitizing, truncation or case folds together', () => {
    const ids = [...HOSTILE, 'a_b', 'a/b', 'a.b', 'a b', 'x'.repeat(10_001), 'x'.repeat(10_000) + 'y'];
    const names = ids.map(workspaceName);
    expect(new Set(names).size).toBe(new Set(ids).size);
    expect(new Set(names.map((n) => n.toLowerCase())).size).toBe(new Set(ids).size);
    // Lone surrogates are not folded into U+FFFD.
    expect(workspaceName('\uD800')).not.toBe(workspaceName('\uFFFD'));
  });

  it('is stable, and readable for ordinary ids', () => {
    expect(workspaceName('alice')).toBe(workspaceName('alice'));
    expect(workspaceName('alice')).toMatch(/^alice-/);
    expect(workspaceName('team.bob@example.com')).toMatch(/^team_bob_example_com-/);
  });
});

describe('tenantUid', () => {
  it('is stable and inside the documented range', () => {
    for (const id of HOSTILE) {
      const uid = tenantUid(id);
      expect(uid).toBe(tenantUid(id));
      expect(Number.isInteger(uid)).toBe(true);
      expect(uid).toBeGreaterThanOrEqual(TENANT_UID_BASE);
      expect(uid).toBeLessThan(TENANT_UID_BASE + TENANT_UID_SPAN);
      expect(uid).toBeLessThan(2 ** 31);
    }
  });

  it('spreads tenants over distinct uids', () => {
    const uids = new Set(Array.from({ length: 1000 }, (_, i) => tenantUid(`tenant-${i}`)));
    expect(uids.size).toBe(1000);
  });
});
