/**
 * Long calls stay usable (issue 11, DESIGN §3): the official SDK 1.x client with `timeout: 3000`
 * and `resetTimeoutOnProgress: true` runs a 10 s command to completion, because toolgate sends
 * `notifications/progress` while it runs — over stdio, over HTTP on the embedded bus and on
 * BullMQ (a real Redis, a separate executor), and through the shim. The progress messages carry
 * the command's newest output line, arrive while it still runs, and grow.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FaultStack } from '../faults/stack';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { BIN } from '../stdio/server';

jest.setTimeout(60_000);

/** The embedded stack's executor runs on `none`, which serves one identity: every client here uses it. */
const ONE_IDENTITY = 'long-embedded';
const INTERVAL_MS = '500';
/** Ten seconds, one line a second: the client's own timeout (3 s) is far shorter. */
const COMMAND = 'for i in 1 2 3 4 5 6 7 8 9 10; do echo "step $i of 10"; sleep 1; done';

interface Seen {
  at: number;
  progress: number;
  message?: string;
}

async function runLongCommand(transport: Transport): Promise<{ seen: Seen[]; result: any; startedAt: number; endedAt: number }> {
  const client = new Client({ name: 'long-calls', version: '1.0.0' });
  await client.connect(transport);
  const seen: Seen[] = [];
  try {
    const startedAt = Date.now();
    const result = await client.callTool({ name: 'run_command', arguments: { command: COMMAND, timeout_ms: 30_000 } }, undefined, {
      timeout: 3000,
      resetTimeoutOnProgress: true,
      onprogress: (p) => seen.push({ at: Date.now(), progress: p.progress, ...(p.message !== undefined ? { message: p.message } : {}) }),
    });
    return { seen, result, startedAt, endedAt: Date.now() };
  } finally {
    await client.close();
  }
}

function expectProgressWhileRunning(run: Awaited<ReturnType<typeof runLongCommand>>): void {
  expect(run.result.isError).toBeFalsy();
  expect(run.result.structuredContent).toMatchObject({ exitCode: 0, timedOut: false });
  expect(run.result.structuredContent.stdout).toContain('step 10 of 10');
  expect(run.endedAt - run.startedAt).toBeGreaterThanOrEqual(9_000);
  // Progress throughout, not only at the end: no gap as long as the client's 3 s timeout.
  const times = [run.startedAt, ...run.seen.map((s) => s.at), run.endedAt];
  const gaps = times.slice(1).map((t, i) => t - times[i]!);
  expect(Math.max(...gaps)).toBeLessThan(3000);
  // `progress` grows; messages carry the newest output line.
  run.seen.forEach((s, i) => i > 0 && expect(s.progress).toBeGreaterThan(run.seen[i - 1]!.progress));
  const steps = run.seen
    .map((s) => /step (\d+) of 10/.exec(s.message ?? '')?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number);
  expect(steps.length).toBeGreaterThan(5);
  expect(steps).toEqual([...steps].sort((a, b) => a - b));
  expect(steps[steps.length - 1]).toBeGreaterThanOrEqual(8);
}

test('stdio: a 10 s command completes under a 3 s client timeout, with progress carrying its newest line', async () => {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-long-'));
  try {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'stdio', '--root', root, '--sandbox', 'none'],
      env: { ...getDefaultEnvironment(), TOOLGATE_PROGRESS_INTERVAL_MS: INTERVAL_MS, TOOLGATE_LOG_LEVEL: 'warn' },
      stderr: 'ignore',
    });
    expectProgressWhileRunning(await runLongCommand(transport));
  } finally {
    await fs.rm(root, { recursive: true, force: true });
  }
});

describe('HTTP and the shim', () => {
  let embedded: FaultStack;
  beforeAll(async () => {
    embedded = await FaultStack.start({ env: { TOOLGATE_PROGRESS_INTERVAL_MS: INTERVAL_MS } });
  });
  afterAll(async () => {
    await embedded?.close();
  });

  test('HTTP, embedded bus: progress arrives as an event stream', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(embedded.url), {
      requestInit: { headers: { Authorization: `Bearer ${embedded.token(ONE_IDENTITY)}` } },
    });
    expectProgressWhileRunning(await runLongCommand(transport));
  });

  test("through the shim: the gateway's event stream becomes notifications on the agent's stdout", async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'shim', '--url', embedded.url],
      env: { ...getDefaultEnvironment(), TOOLGATE_TOKEN: embedded.token(ONE_IDENTITY), TOOLGATE_LOG_LEVEL: 'warn' },
      stderr: 'ignore',
    });
    expectProgressWhileRunning(await runLongCommand(transport));
  });

  test("a client that does not read event streams (the spec's curl call) still gets plain JSON", async () => {
    const res = await fetch(embedded.url, {
      method: 'POST',
      headers: { Authorization: `Bearer ${embedded.token(ONE_IDENTITY)}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'run_command', arguments: { command: 'sleep 1.5; echo done' }, _meta: { progressToken: 'p' } },
      }),
    });
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await res.json()) as any).result.structuredContent.stdout).toBe('done\n');
  });
});

describeRedis('HTTP on BullMQ', () => {
  let redis: TestRedis;
  let stack: FaultStack;
  beforeAll(async () => {
    redis = await startRedis();
    stack = await FaultStack.start({ redis, env: { TOOLGATE_PROGRESS_INTERVAL_MS: INTERVAL_MS } });
  });
  afterAll(async () => {
    await stack?.close();
    await redis?.close();
  });

  test('progress crosses Redis from the executor process to the gateway and the client', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(stack.url), {
      requestInit: { headers: { Authorization: `Bearer ${stack.token('long-bullmq')}` } },
    });
    expectProgressWhileRunning(await runLongCommand(transport));
  });
});
