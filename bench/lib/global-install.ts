/**
 * The package as a user installs it: `npm pack` of this checkout's dist/ (no `prepare`: build
 * first) installed with `npm install --global` into a private prefix, from npm's cache
 * (`--offline`: the dependencies this checkout's `npm install` already fetched). Its bins are
 * npm's symlinks, so the kernel reads their `#!` lines, as for a global install or npx.
 */
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from './product';

export interface GlobalInstall {
  /** The path of an installed bin (`toolgate`, `generate-token`). */
  bin(name: string): string;
  remove(): Promise<void>;
}

export async function installGlobally(): Promise<GlobalInstall> {
  const run = promisify(execFile);
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-bench-global-'));
  try {
    const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { cwd: REPO_ROOT });
    const [packed] = JSON.parse(stdout) as Array<{ filename: string }>;
    const prefix = path.join(tmp, 'prefix');
    await run('npm', ['install', '--global', '--prefix', prefix, '--offline', '--no-audit', '--no-fund', path.join(tmp, packed!.filename)], {
      cwd: tmp,
      env: { ...process.env, npm_config_loglevel: 'error' },
    });
    return { bin: (name) => path.join(prefix, 'bin', name), remove: () => fs.rm(tmp, { recursive: true, force: true }) };
  } catch (err) {
    await fs.rm(tmp, { recursive: true, force: true });
    throw err;
  }
}
