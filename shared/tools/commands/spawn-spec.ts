/**
 * The shared input of run_command and start_process (command | argv, cwd, env) and its checks,
 * turned into an exact ProcessSpec.
 */
import { accessSync, constants, Stats, statSync } from 'node:fs';
import * as path from 'node:path';
import type { Zod } from '../zod';
import { ToolError } from '../../protocol/errors';
import type { SandboxContext } from '../tool';
import { commandEnv, envSchema } from './environment';
import type { ProcessSpec } from './process-host';

const noNul = (z: Zod, what: string) => z.string().refine((s) => !s.includes('\0'), `${what} must not contain NUL bytes`);

export const commandFields = (z: Zod) => ({
  command: noNul(z, 'command').min(1).optional().describe('A shell command line, run by /bin/sh -c'),
  argv: z.array(noNul(z, 'argv items')).min(1).optional().describe('An exact argument vector, executed without a shell; argv[0] is looked up in PATH'),
  cwd: z.string().optional().describe('Working directory inside the workspace (default: the workspace root)'),
  env: envSchema(z).optional(),
});

export const ONE_COMMAND = 'give exactly one of `command` (a shell string) or `argv` (an argument vector)';
export const hasOneCommand = (v: { command?: string | undefined; argv?: string[] | undefined }): boolean =>
  (v.command === undefined) !== (v.argv === undefined);

interface CommandArgs {
  command?: string | undefined;
  argv?: string[] | undefined;
  cwd?: string | undefined;
  env?: Record<string, string> | undefined;
}

const quote = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

export async function toProcessSpec(args: CommandArgs, ctx: SandboxContext, pty: boolean): Promise<ProcessSpec> {
  const { workspace } = ctx;
  const cwd = await workspace.resolve(args.cwd ?? '.');
  const stat = statOrUndefined(cwd);
  if (!stat) throw new ToolError(`No such directory: ${workspace.display(cwd)}`);
  if (!stat.isDirectory()) throw new ToolError(`Not a directory: ${workspace.display(cwd)}`);

  const env = commandEnv(workspace.root, args.env, pty, ctx.env);
  const [file, ...rest] = args.command !== undefined ? ['/bin/sh', '-c', args.command] : (args.argv ?? []);
  if (file === undefined || file === '') throw new ToolError(`${ONE_COMMAND}; argv[0] must not be empty`);
  assertExecutable(file, env.PATH ?? '', cwd);
  return { file, args: rest, cwd, env, pty, command: args.command ?? (args.argv ?? []).map(quote).join(' ') };
}

/**
 * A clear "not found" before spawning: node-pty reports a failed exec only as output, and a
 * missing cwd and a missing program look alike in spawn's ENOENT. Synchronous on purpose: a
 * handful of stat calls on local paths take microseconds, while each async one is a round trip
 * through libuv's thread pool (together ~0.9 ms of every run_command, measured).
 */
function assertExecutable(file: string, searchPath: string, cwd: string): void {
  const candidates = file.includes('/')
    ? [path.resolve(cwd, file)]
    : searchPath
        .split(':')
        .filter(Boolean)
        .map((dir) => path.join(dir, file));
  let sawFile = false;
  for (const candidate of candidates) {
    if (!statOrUndefined(candidate)?.isFile()) continue;
    sawFile = true;
    try {
      accessSync(candidate, constants.X_OK);
      return;
    } catch {
      // not executable by this uid: try the next one
    }
  }
  throw new ToolError(sawFile ? `Permission denied: ${file} is not executable` : `Command not found: ${file}`);
}

/** Its stat, or undefined when it cannot be had (missing, not a directory on the way, no permission). */
function statOrUndefined(p: string): Stats | undefined {
  try {
    return statSync(p, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}
