/**
 * Suites that need a component this machine may lack (bubblewrap, Redis, Docker) call
 * `describeIf`. Outside CI a missing component skips the suite with a printed reason; in CI
 * (CI=true) every suite must run, so a missing component fails instead.
 */
import { execFileSync } from 'node:child_process';

export function describeIf(available: boolean, reason: string, name: string, body: () => void): void {
  if (available) return describe(name, body);
  if (process.env.CI === 'true') {
    return describe(name, () => {
      it('has what it needs', () => {
        throw new Error(`${name} cannot run in CI: ${reason}`);
      });
    });
  }
  console.warn(`SKIPPED ${name}: ${reason}`);
  describe.skip(name, body);
}

/** One test that needs a component: the same rule as describeIf (skipped with a reason outside CI, failed in CI). */
export function itIf(available: boolean, reason: string, name: string, fn: () => Promise<unknown>, timeoutMs?: number): void {
  if (available) return it(name, fn, timeoutMs);
  if (process.env.CI === 'true') {
    return it(name, () => {
      throw new Error(`${name} cannot run in CI: ${reason}`);
    });
  }
  console.warn(`SKIPPED ${name}: ${reason}`);
  it.skip(name, fn);
}

export function hasCommand(cmd: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export const isRoot = process.getuid?.() === 0;
