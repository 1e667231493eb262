import { structuredResult } from '../result';
import { defineTool } from '../tool';
import type { HeadTailBuffer } from './head-tail-buffer';
import { runToCompletion } from './run-to-completion';
import { commandFields, hasOneCommand, ONE_COMMAND, toProcessSpec } from './spawn-spec';

const section = (name: string, out: HeadTailBuffer, text: string): string =>
  out.total === 0 ? '' : `\n--- ${name}${out.truncated ? ` (truncated: ${out.cut} of ${out.total} bytes cut from the middle)` : ''} ---\n${text}`;

/**
 * Progress lines leave the sandbox for logs, proxies and the client's UI: values the caller put
 * in `env` (tokens, passwords) are masked should the command print them.
 */
function redacting(report: (line: string) => void, secrets: readonly string[]): (line: string) => void {
  const masked = secrets.filter((s) => s.length >= 4);
  if (masked.length === 0) return report;
  return (line) => report(masked.reduce((text, secret) => text.split(secret).join('***'), line));
}

export const runCommand = defineTool({
  name: 'run_command',
  title: 'Run command',
  description:
    'Run a command in the sandbox and wait for it: `command` (a shell string, run by /bin/sh -c) or `argv` (exact exec). ' +
    'Returns the exit code (a non-zero exit is a normal result), the signal that ended it, stdout and stderr (each capped: ' +
    'past the cap its first and last parts are kept around a line saying how many bytes were cut, and `truncated` is true) and the duration. ' +
    'On timeout the whole process group is killed and `timedOut` is true; a command whose output passes a hard cap is killed the same way ' +
    '(`stoppedForOutput`): redirect a flood to a file and read or search that. ' +
    'Anything the command leaves running is killed when it exits; use start_process for long-running work. ' +
    'The environment is minimal (PATH, HOME=workspace, LANG, SHLVL) plus `env`.',
  permission: 'system:exec',
  host: 'sandbox',
  input: (z) =>
    z
      .object({
        ...commandFields(z),
        stdin: z.string().optional().describe("Text written to the command's standard input, which is then closed (default: empty)"),
        timeout_ms: z
          .number()
          .int()
          .positive()
          .optional()
          .describe('Kill the command after this many milliseconds (default and maximum are configured; a larger value is capped, and the result says so)'),
      })
      .refine(hasOneCommand, ONE_COMMAND),
  output: (z) =>
    z.object({
      exitCode: z.number().optional().describe('Absent when a signal ended it'),
      signal: z.string().optional().describe('The signal that ended it, e.g. SIGKILL; absent when it exited'),
      stdout: z.string(),
      stderr: z.string(),
      stdoutBytes: z.number().describe('Bytes the command wrote to stdout, kept or not'),
      stderrBytes: z.number(),
      stdoutTruncated: z.boolean(),
      stderrTruncated: z.boolean(),
      truncated: z.boolean(),
      timedOut: z.boolean(),
      durationMs: z.number(),
      // Optional in the schema (always sent): a sandbox agent one version older omits it, and a
      // required field would make clients reject its results.
      timeoutMs: z.number().optional().describe('The timeout applied: timeout_ms, or the default, at most the configured maximum'),
      timeoutCapped: z.boolean().optional().describe('True when timeout_ms was above the maximum and the maximum was applied'),
      stoppedForOutput: z
        .boolean()
        .optional()
        .describe('True when the output passed the hard cap (TOOLGATE_MAX_COMMAND_OUTPUT_BYTES) and the process group was killed'),
    }),
  annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
  async run(args, ctx) {
    const spec = await toProcessSpec(args, ctx, false);
    const timeoutMs = Math.min(args.timeout_ms ?? ctx.limits.commandTimeoutMs, ctx.limits.maxCommandTimeoutMs);
    // A larger request is run with the maximum, not refused, and the caller is told so.
    const capped =
      args.timeout_ms !== undefined && args.timeout_ms > timeoutMs
        ? `timeout_ms ${args.timeout_ms} is above the server's maximum; capped to ${timeoutMs} ms (TOOLGATE_MAX_COMMAND_TIMEOUT_MS)\n`
        : '';
    const r = await runToCompletion(spec, {
      stdin: args.stdin,
      timeoutMs,
      maxOutputBytes: ctx.limits.maxOutputBytes,
      maxTotalOutputBytes: ctx.limits.maxCommandOutputBytes,
      signal: ctx.signal,
      ...(ctx.progress ? { onLine: redacting(ctx.progress, Object.values(args.env ?? {})) } : {}),
    });
    const stdout = r.stdout.text();
    const stderr = r.stderr.text();
    const value = {
      ...(r.exitCode !== null ? { exitCode: r.exitCode } : {}),
      ...(r.signal !== null ? { signal: r.signal } : {}),
      stdout,
      stderr,
      stdoutBytes: r.stdout.total,
      stderrBytes: r.stderr.total,
      stdoutTruncated: r.stdout.truncated,
      stderrTruncated: r.stderr.truncated,
      truncated: r.stdout.truncated || r.stderr.truncated,
      timedOut: r.timedOut,
      durationMs: r.durationMs,
      timeoutMs,
      ...(capped ? { timeoutCapped: true } : {}),
      ...(r.stoppedForOutput ? { stoppedForOutput: true } : {}),
    };
    const status = r.timedOut
      ? `timed out after ${timeoutMs} ms; process group killed`
      : r.stoppedForOutput
        ? `stopped: its output passed ${ctx.limits.maxCommandOutputBytes} bytes (TOOLGATE_MAX_COMMAND_OUTPUT_BYTES); process group killed`
        : r.signal !== null
          ? `killed by ${r.signal}`
          : `exit code ${r.exitCode}`;
    const text = `${capped}${status} (${r.durationMs} ms)${section('stdout', r.stdout, stdout)}${section('stderr', r.stderr, stderr)}`;
    return structuredResult(value, text);
  },
});
