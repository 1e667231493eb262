/**
 * Workspace images an executor mounts (TOOLGATE_WORKSPACE_QUOTA_BYTES) outlive an executor a
 * test killed: suites unmount everything under their data directory before removing it, so
 * no loop device or mount leaks from one run to the next.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';

export async function unmountUnder(dir: string): Promise<void> {
  const root = path.resolve(dir);
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' ')[4]!.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((m) => m.startsWith(`${root}/`))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    try {
      execFileSync('umount', [m], { stdio: 'ignore' });
    } catch {
      execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    }
  }
}
