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
  exitCode: z.number().nullable(),
  signal: z.string().nullable(),
  startedAt: z.string(),
  durationMs: z.number(),
  outputBytes: z.number().describe('Output produced so far: the offset of the next byte'),
});
export const processInfoSchema = (z: Zod) => z.object(processInfoShape(z));

export const handleSchema = (z: Zod) => z.string().min(1).max(64).describe('The handle start_process returned, e.g. "p1"');

export function describeProcess(p: ProcessInfo): string {
  const state = p.running ? 'running' : p.signal !== null ? `killed by ${p.signal}` : `exited with code ${p.exitCode}`;
  return `${p.handle} (pid ${p.pid}${p.pty ? ', pty' : ''}) ${state}, ${p.durationMs} ms, ${p.outputBytes} bytes of output: ${p.command}`;
}
