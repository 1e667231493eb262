/** What this machine can run: each check answers undefined (yes) or the reason it cannot. */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as path from 'node:path';

export function which(file: string): string | undefined {
  for (const dir of ['/usr/local/bin', '/usr/bin', '/bin', '/usr/sbin', '/sbin']) {
    const p = path.join(dir, file);
    if (existsSync(p)) return p;
  }
  return undefined;
}

export function run(
  file: string,
  args: string[],
  options: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: options.timeoutMs ?? 30_000, env: options.env ?? process.env, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) || (err && code === 1 ? err.message : '') });
    });
  });
}

/** bubblewrap as the bwrap backend uses it: root (to drop to the sandbox uid), bwrap, setpriv, prlimit. */
export async function canRunBwrap(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'the bwrap backend needs root here';
  const missing = ['bwrap', 'setpriv', 'prlimit'].filter((c) => !which(c));
  if (missing.length) return `missing ${missing.join(', ')} (Debian: bubblewrap, util-linux)`;
  const probe = await run(which('bwrap')!, [
    '--unshare-all',
    '--ro-bind',
    '/usr',
    '/usr',
    '--symlink',
    'usr/bin',
    '/bin',
    '--symlink',
    'usr/lib',
    '/lib',
    '--symlink',
    'usr/lib64',
    '/lib64',
    '--',
    '/usr/bin/true',
  ]);
  return probe.code === 0 ? undefined : `bwrap cannot start a sandbox here: ${probe.stderr.trim()}`;
}

export const REDIS_SERVER = '/usr/bin/redis-server';

export function canRunRedis(): string | undefined {
  return existsSync(REDIS_SERVER) ? undefined : `${REDIS_SERVER} is not installed (apt-get install redis-server)`;
}
