/**
 * The audit log: one line per finished tool call with identity, tool, outcome, duration and
 * argument shape — and never the values: file contents, commands, their output, secrets.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { startAudit } from '../../executor/audit';
import { Executor, startExecutor } from '../../executor/executor';
import { InProcessBus } from '../../shared/bus/in-process';
import { ErrorCode } from '../../shared/protocol/errors';
import { call, CapturingBus, capturedLogger, sleep, testConfig, until } from './helpers';

const auditLines = (cap: ReturnType<typeof capturedLogger>) => cap.lines.filter((l) => l.audit === true && l.event === 'tool.call');

describe('audit log through a running executor', () => {
  let dataDir: string;
  let bus: CapturingBus;
  let executor: Executor | undefined;
  let cap: ReturnType<typeof capturedLogger>;

  beforeEach(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-audit-'));
    bus = new CapturingBus();
    // warn: audit lines are written even when ordinary info lines are not.
    cap = capturedLogger('warn');
    executor = await startExecutor({ config: testConfig(dataDir), bus, log: cap.log });
  });
  afterEach(async () => {
    await executor?.close();
    await bus.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it("names the caller's trace context (traceparent, tracestate) when the call carried one, and nothing when it did not", async () => {
    const trace = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'congo=t61rcWkgMzE' };
    await call(bus, 'alice', 'list_directory', { path: '.' }, { trace });
    await call(bus, 'alice', 'list_directory', { path: '.' });
    await until(() => auditLines(cap).length === 2);
    const [traced, plain] = auditLines(cap);
    expect(traced).toMatchObject({ tool: 'list_directory', outcome: 'ok', traceparent: trace.traceparent, tracestate: trace.tracestate });
    expect(plain).not.toHaveProperty('traceparent');
  });

  it('writes one line per call with identity, tool, outcome, duration and argument shape, never values', async () => {
    const SECRET_CONTENT = 'S3CRET-FILE-CONTENT-7f1e';
    const COMMAND_OUTPUT = 'COMMAND-OUTPUT-9a2b';
    await call(bus, 'alice', 'write_file', { path: 'notes/secret.txt', content: SECRET_CONTENT });
    const read = await call(bus, 'alice', 'read_file', { path: 'notes/secret.txt' });
    expect(JSON.stringify(read)).toContain(SECRET_CONTENT);
    // The output is assembled by the shell, so neither the command text nor its output holds the marker whole.
    // One identity throughout: the executor runs on `none`, which serves a single identity.
    const ran = await call(bus, 'alice', 'run_command', { command: 'echo COMMAND-OUTPUT-$((9))a2b', env: { API_TOKEN: 'tok-abc-123' } });
    expect(String(ran.structuredContent?.stdout)).toContain(COMMAND_OUTPUT);
    const missing = await call(bus, 'alice', 'read_file', { path: 'nope.txt' });
    expect(missing.isError).toBe(true);
    await expect(call(bus, 'alice', 'run_command', { command: 'id' }, { permissions: ['file:read'] })).rejects.toMatchObject({
      code: ErrorCode.PermissionDenied,
    });

    await until(() => auditLines(cap).length === 5);
    const lines = auditLines(cap);
    expect(lines[0]).toMatchObject({
      identity: 'alice',
      tool: 'write_file',
      outcome: 'ok',
      args: { path: 'string(16)', content: `string(${SECRET_CONTENT.length})` },
    });
    expect(lines[1]).toMatchObject({ identity: 'alice', tool: 'read_file', outcome: 'ok', args: { path: 'string(16)' } });
    expect(lines[2]).toMatchObject({
      identity: 'alice',
      tool: 'run_command',
      outcome: 'ok',
      args: { command: expect.stringMatching(/^string\(\d+\)$/), env: 'object' },
    });
    expect(lines[3]).toMatchObject({ identity: 'alice', tool: 'read_file', outcome: 'tool_error' });
    expect(lines[4]).toMatchObject({ identity: 'alice', tool: 'run_command', outcome: 'error', code: ErrorCode.PermissionDenied, error: 'PermissionDenied' });
    for (const line of lines) {
      expect(line).toMatchObject({ jobId: expect.any(String), durationMs: expect.any(Number), level: 30 });
      expect(line.durationMs as number).toBeGreaterThanOrEqual(0);
    }

    // Nothing the executor logged — audit or not — holds a value.
    const everything = cap.raw();
    for (const secret of [SECRET_CONTENT, COMMAND_OUTPUT, 'tok-abc-123', 'echo ', 'notes/secret.txt', 'nope.txt']) expect(everything).not.toContain(secret);
  });

  it('audits calls that time out with their error code', async () => {
    const now = Date.now();
    await expect(call(bus, 'alice', 'run_command', { command: 'sleep 2' }, { deadline: now + 300, startBy: now + 300 })).rejects.toMatchObject({
      code: ErrorCode.Timeout,
    });
    await until(() => auditLines(cap).length === 1);
    expect(auditLines(cap)[0]).toMatchObject({ identity: 'alice', tool: 'run_command', outcome: 'error', error: 'Timeout' });
  });
});

describe('audit of an embedded executor', () => {
  it('also audits calls that never started (the deadline passed while they waited behind a busy pool)', async () => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-audit-'));
    const bus = new CapturingBus();
    const cap = capturedLogger();
    const executor = await startExecutor({ config: testConfig(dataDir, { TOOLGATE_EXECUTOR_CONCURRENCY: '1' }), bus, log: cap.log });
    try {
      const busy = call(bus, 'alice', 'run_command', { command: 'sleep 1' });
      const now = Date.now();
      // A busy pool is not a missing one: past its start-by the call keeps waiting, until its deadline.
      await expect(call(bus, 'bob', 'list_directory', {}, { startBy: now + 200, deadline: now + 400 })).rejects.toMatchObject({ code: ErrorCode.Timeout });
      await busy;
      await until(() => auditLines(cap).length === 2);
      expect(auditLines(cap)).toEqual([
        expect.objectContaining({ identity: 'bob', tool: 'list_directory', outcome: 'error', error: 'Timeout', args: {} }),
        expect.objectContaining({ identity: 'alice', tool: 'run_command', outcome: 'ok' }),
      ]);
    } finally {
      await executor.close();
      await bus.close();
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('audit joins events however they arrive', () => {
  const outcome = (jobId: string) => ({ type: 'job.completed' as const, jobId, tenant: 't', tool: 'read_file', at: Date.now(), durationMs: 4, isError: false });
  const enqueued = (jobId: string) => ({ type: 'job.enqueued' as const, jobId, tenant: 't', tool: 'read_file', at: Date.now(), args: { path: 'string(3)' } });

  it('waits briefly for an argument shape that arrives after the outcome, then writes without it', async () => {
    const bus = new InProcessBus();
    const cap = capturedLogger();
    const audit = startAudit({ bus, log: cap.log, joinWaitMs: 200 });
    bus.publish(outcome('late-shape'));
    bus.publish(outcome('no-shape'));
    await sleep(50);
    bus.publish(enqueued('late-shape'));
    await until(() => auditLines(cap).length === 2);
    expect(auditLines(cap)).toEqual([
      expect.objectContaining({ jobId: 'late-shape', args: { path: 'string(3)' } }),
      expect.objectContaining({ jobId: 'no-shape', args: null }),
    ]);
    audit.stop();
  });

  it('writes only the jobs it is told to (each executor audits the jobs it ran), with the shape its outcome names', async () => {
    const bus = new InProcessBus();
    const cap = capturedLogger();
    const audit = startAudit({ bus, log: cap.log, includes: (id) => id === 'mine' });
    for (const id of ['mine', 'theirs']) {
      // On Redis the executor's outcome names the shape; the gateway's job.enqueued may come later.
      bus.publish({ ...outcome(id), args: { path: 'string(4)' } });
      bus.publish(enqueued(id));
    }
    await sleep(50);
    expect(auditLines(cap).map((l) => l.jobId)).toEqual(['mine']);
    expect(auditLines(cap)[0]).toMatchObject({ args: { path: 'string(4)' } });
    audit.stop();
    bus.publish(enqueued('after'));
    bus.publish(outcome('after'));
    await sleep(50);
    expect(auditLines(cap)).toHaveLength(1);
  });

  it("censors the logger's redacted keys in the argument shape itself (its line skips pino's redaction)", async () => {
    const bus = new InProcessBus();
    const cap = capturedLogger(); // a logger without redaction: what is censored, the audit censored
    const audit = startAudit({ bus, log: cap.log });
    const args = { path: 'string(3)', token: 'string(40)', password: 'string(12)', secret: 'object', authorization: 'string(7)' };
    bus.publish({ ...outcome('keys'), args });
    await until(() => auditLines(cap).length === 1);
    expect(auditLines(cap)[0]!.args).toEqual({
      path: 'string(3)',
      token: '[redacted]',
      password: '[redacted]',
      secret: '[redacted]',
      authorization: '[redacted]',
    });
    expect(args.token).toBe('string(40)'); // the event itself is not changed
    audit.stop();
  });

  it('stays silent only when the log level is silent', async () => {
    const bus = new InProcessBus();
    const cap = capturedLogger('silent');
    const audit = startAudit({ bus, log: cap.log });
    bus.publish(enqueued('x'));
    bus.publish(outcome('x'));
    await sleep(50);
    expect(cap.raw()).toBe('');
    audit.stop();
  });
});
