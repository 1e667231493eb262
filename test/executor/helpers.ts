/** Shared pieces of the executor suites: config over a temp data dir, a captured logger, jobs. */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { Permission } from '../../shared/auth/permissions';
import { PERMISSIONS } from '../../shared/auth/permissions';
import type { JobHandler, ToolCallJob } from '../../shared/bus/bus';
import type { BusEvent } from '../../shared/bus/events';
import { InProcessBus } from '../../shared/bus/in-process';
import { Config, loadConfig } from '../../shared/config';
import type { Logger } from '../../shared/log';
import type { ToolResult } from '../../shared/tools/tool';

export function testConfig(dataDir: string, env: Record<string, string> = {}): Readonly<Config> {
  return loadConfig({ TOOLGATE_DATA_DIR: dataDir, TOOLGATE_SANDBOX: 'none', TOOLGATE_SHUTDOWN_GRACE_MS: '2000', ...env }, dataDir);
}

/** A real pino logger whose lines are kept in memory, parsed. */
export function capturedLogger(level = 'info'): { log: Logger; lines: Array<Record<string, unknown>>; raw: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString('utf8'));
      done();
    },
  });
  const log = pino({ level }, stream);
  const raw = () => chunks.join('');
  return {
    log,
    raw,
    get lines() {
      return raw()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    },
  };
}

/** The in-process bus, keeping the executor's handler so suites can hand it forged jobs, and every event. */
export class CapturingBus extends InProcessBus {
  handler: JobHandler | undefined;
  readonly events: BusEvent[] = [];

  constructor() {
    super();
    this.subscribe((e) => this.events.push(e));
  }

  override consume(handler: JobHandler, options: { concurrency: number }) {
    this.handler = handler;
    return super.consume(handler, options);
  }
}

export function job(tenant: string, tool: string, args: unknown, overrides: Partial<ToolCallJob> = {}): ToolCallJob {
  const now = Date.now();
  return { id: randomUUID(), tenant, permissions: [...PERMISSIONS] as Permission[], tool, args, deadline: now + 20_000, startBy: now + 10_000, ...overrides };
}

/** One call through the bus, as the gateway makes it. */
export function call(
  bus: InProcessBus,
  tenant: string,
  tool: string,
  args: unknown,
  overrides: Partial<ToolCallJob> = {},
  signal = new AbortController().signal,
): Promise<ToolResult> {
  return bus.call(job(tenant, tool, args, overrides), signal);
}

export const text = (r: ToolResult): string => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until(check: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(20);
  }
}
