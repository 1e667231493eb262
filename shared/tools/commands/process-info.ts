/** How a ProcessInfo is published: its output schema and a one-line text form. */
import type { Zod } from '../zod';
import type { ProcessInfo } from './process-host';

/** Schemas are functions of `z`, built on first use (../zod.ts). */
export const processInfoShape = (z: Zod) => ({
  handle: z.string(),
  pid: z.number(),
  command: z.string(),
  pty: z.boolean(),
  running: z.boolean(),
  // Optional rather than nullable: `["number","null"]` is a type union that several model APIs'
  // schema dialects refuse (test/tools/schema-portability.test.ts); an unknown value is left out.
  exitCode: z.number().optional().describe('Absent while it runs, and when a signal ended it'),
  signal: z.string().optional().describe('The signal that ended it, e.g. SIGKILL; absent otherwise'),
  startedAt: z.string(),
  durationMs: z.number(),
  outputBytes: z.number().describe('Output produced so far: the offset of the next byte'),
});
export const processInfoSchema = (z: Zod) => z.object(processInfoShape(z));

/** A ProcessInfo as structuredContent: the unknown exit code or signal left out, not null. */
export function publishedInfo(info: ProcessInfo): Record<string, unknown> {
  const { exitCode, signal, ...rest } = info;
  return { ...rest, ...(exitCode !== null ? { exitCode } : {}), ...(signal !== null ? { signal } : {}) };
}

export const handleSchema = (z: Zod) => z.string().min(1).max(64).describe('The handle start_process returned, e.g. "p1"');

export function describeProcess(p: ProcessInfo): string {
  const state = p.running ? 'running' : p.signal !== null ? `killed by ${p.signal}` : `exited with code ${p.exitCode}`;
  return `${p.handle} (pid ${p.pid}${p.pty ? ', pty' : ''}) ${state}, ${p.durationMs} ms, ${p.outputBytes} bytes of output: ${p.command}`;
}
