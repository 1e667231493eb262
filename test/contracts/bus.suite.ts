/**
 * The contract every bus must pass (in-process, BullMQ): calls and their own replies,
 * deadlines, start-by, cancellation, errors, events, revocations and shutdown. Run from one
 * small .test.ts per implementation.
 */
import { randomUUID } from 'node:crypto';
import type { Bus, JobControl, ToolCallJob } from '../../shared/bus/bus';
import type { BusEvent } from '../../shared/bus/events';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import type { ToolResult } from '../../shared/tools/tool';

export interface BusUnderTest {
  /** A fresh bus on a clean backend. */
  create(): Promise<Bus>;
  /** Another bus on the same backend, as a second process would hold (absent: one process only). */
  peer?(): Promise<Bus>;
  /** After each test, once its buses are closed (e.g. empty Redis). */
  reset?(): Promise<void>;
}

export const never = () => new AbortController().signal;
export const textResult = (text: string): ToolResult => ({ content: [{ type: 'text', text }] });
export const textOf = (r: ToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

export function makeJob(overrides: Partial<ToolCallJob> = {}): ToolCallJob {
  const now = Date.now();
  return { id: randomUUID(), tenant: 'alice', permissions: ['file:read'], tool: 'echo', args: {}, deadline: now + 10_000, startBy: now + 5_000, ...overrides };
}

/** Polls until `check` holds (the bus delivers asynchronously), failing with `what`. */
export async function until(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A handler that runs until its signal aborts, then rejects with the abort reason. */
function waitForAbort(onStart: (job: ToolCallJob, signal: AbortSignal) => void) {
  return (job: ToolCallJob, { signal }: JobControl) =>
    new Promise<ToolResult>((_, reject) => {
      onStart(job, signal);
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
}

export function busContract(name: string, under: BusUnderTest): void {
  describe(`bus contract: ${name}`, () => {
    const opened: Bus[] = [];
    let bus: Bus;
    const open = async (make: () => Promise<Bus>) => {
      const b = await make();
      opened.push(b);
      return b;
    };

    beforeEach(async () => {
      bus = await open(() => under.create());
    });
    afterEach(async () => {
      for (const b of opened.splice(0)) await b.close();
      await under.reset?.();
    });

    it('delivers a call to the consumer unchanged and its result back', async () => {
      const seen: ToolCallJob[] = [];
      const result: ToolResult = {
        content: [{ type: 'text', text: 'hi bob' }],
        structuredContent: { n: 1, nested: { list: [1, 'two', null] } },
        isError: true,
      };
      await bus.consume(async (job) => (seen.push(job), result), { concurrency: 1 });
      const job = makeJob({ args: { name: 'bob', deep: { a: [1, 2] } }, permissions: ['file:read', 'network:http'] });
      expect(await bus.call(job, never())).toEqual(result);
      expect(seen).toEqual([job]);
      expect(await bus.ready()).toBe(true);
    });

    it("carries the caller's trace context to the consumer, whose job events name it", async () => {
      const trace = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01', tracestate: 'vendor=abc' };
      const seen: ToolCallJob[] = [];
      const events: BusEvent[] = [];
      bus.subscribe((e) => events.push(e));
      await bus.consume(async (job) => (seen.push(job), textResult('ok')), { concurrency: 1 });
      const job = makeJob({ trace });
      await bus.call(job, never());
      expect(seen[0]?.trace).toEqual(trace);
      await until(() => events.some((e) => e.type === 'job.completed' && e.jobId === job.id), 'job.completed');
      expect(events.find((e) => e.type === 'job.completed' && e.jobId === job.id)).toMatchObject({ trace });
    });

    it('gives each of 200 concurrent calls its own reply', async () => {
      await bus.consume(
        async (job) => {
          await new Promise((r) => setTimeout(r, Math.random() * 5));
          return textResult(`reply-${(job.args as { value: string }).value}`);
        },
        { concurrency: 16 },
      );
      const values = Array.from({ length: 200 }, (_, i) => `${i}-${randomUUID()}`);
      const replies = await Promise.all(values.map((value, i) => bus.call(makeJob({ args: { value }, tenant: `tenant-${i % 7}` }), never())));
      expect(replies.map(textOf)).toEqual(values.map((v) => `reply-${v}`));
    });

    it('fails a call past its deadline with Timeout and aborts the handler', async () => {
      let handlerSignal: AbortSignal | undefined;
      await bus.consume(
        waitForAbort((_, signal) => (handlerSignal = signal)),
        { concurrency: 1 },
      );
      const now = Date.now();
      await expect(bus.call(makeJob({ deadline: now + 400, startBy: now + 400 }), never())).rejects.toMatchObject({
        code: ErrorCode.Timeout,
        message: expect.stringMatching(/^Timeout: echo did not finish/),
      });
      await until(() => handlerSignal?.aborted === true, "the handler's signal to abort");
    });

    it('fails a call no executor starts with Unavailable at its start-by, reports it, and never runs it later', async () => {
      const events: BusEvent[] = [];
      bus.subscribe((e) => events.push(e));
      const job = makeJob({ startBy: Date.now() + 300 });
      await expect(bus.call(job, never())).rejects.toMatchObject({
        code: ErrorCode.Unavailable,
        message: expect.stringMatching(/started the call in time; it did not run/),
      });
      await until(() => events.some((e) => e.type === 'job.failed' && e.jobId === job.id), 'job.failed for the unstarted call');
      expect(events.find((e) => e.type === 'job.failed' && e.jobId === job.id)).toMatchObject({ code: ErrorCode.Unavailable });

      const ran: string[] = [];
      await bus.consume(async (j) => (ran.push(j.id), textResult('ok')), { concurrency: 1 });
      const fresh = makeJob();
      await bus.call(fresh, never());
      expect(ran).toEqual([fresh.id]);
    });

    it('cancels a running call: the caller gets Cancelled and the handler is aborted', async () => {
      let handlerSignal: AbortSignal | undefined;
      await bus.consume(
        waitForAbort((_, signal) => (handlerSignal = signal)),
        { concurrency: 1 },
      );
      const controller = new AbortController();
      const call = bus.call(makeJob(), controller.signal);
      await until(() => handlerSignal !== undefined, 'the handler to start');
      controller.abort();
      await expect(call).rejects.toMatchObject({ code: ErrorCode.Cancelled });
      await until(() => handlerSignal?.aborted === true, "the handler's signal to abort");
    });

    it('keeps a call queued behind a busy consumer past its start-by, and runs it when a slot frees', async () => {
      const release: Array<() => void> = [];
      const seen: Array<{ job: ToolCallJob; at: number }> = [];
      await bus.consume(
        (job) =>
          new Promise<ToolResult>((resolve) => {
            seen.push({ job, at: Date.now() });
            release.push(() => resolve(textResult(`done ${job.id}`)));
          }),
        { concurrency: 1 },
      );
      const first = makeJob();
      const firstCall = bus.call(first, never());
      await until(() => seen.length === 1, 'the first call to start');
      const queued = makeJob({ startBy: Date.now() + 300, deadline: Date.now() + 20_000 });
      const queuedCall = bus.call(queued, never());
      // Past its start-by with the only slot still busy: it must still be waiting, not failed.
      await until(() => Date.now() > queued.startBy + 700, 'the start-by to pass', 5000);
      let settled = false;
      queuedCall.then(
        () => (settled = true),
        () => (settled = true),
      );
      await new Promise((r) => setTimeout(r, 50));
      expect(settled).toBe(false);
      release.shift()!();
      expect(textOf(await firstCall)).toBe(`done ${first.id}`);
      await until(() => seen.length === 2, 'the queued call to start', 10_000);
      expect(seen[1]!.job.id).toBe(queued.id);
      // It started after its first start-by, so the job it carries has a later one (never start late).
      expect(seen[1]!.job.startBy).toBeGreaterThanOrEqual(seen[1]!.at);
      release.shift()!();
      expect(textOf(await queuedCall)).toBe(`done ${queued.id}`);
    });

    it('withdraws a cancelled call that has not started, so it never runs', async () => {
      const controller = new AbortController();
      const job = makeJob();
      const call = bus.call(job, controller.signal);
      await new Promise((r) => setTimeout(r, 50));
      controller.abort();
      await expect(call).rejects.toMatchObject({ code: ErrorCode.Cancelled });
      const aborted = new AbortController();
      aborted.abort();
      await expect(bus.call(makeJob(), aborted.signal)).rejects.toMatchObject({ code: ErrorCode.Cancelled });

      const ran: string[] = [];
      await bus.consume(async (j) => (ran.push(j.id), textResult('ok')), { concurrency: 1 });
      const fresh = makeJob();
      await bus.call(fresh, never());
      await new Promise((r) => setTimeout(r, 100));
      expect(ran).toEqual([fresh.id]);
    });

    it("passes a handler's ProtocolError to the caller with its code, message and data", async () => {
      await bus.consume(
        async () => {
          throw new ProtocolError(ErrorCode.PermissionDenied, 'Permission denied: this tool needs file:write', { permission: 'file:write' });
        },
        { concurrency: 1 },
      );
      const err = await bus.call(makeJob(), never()).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ProtocolError);
      expect(err).toMatchObject({
        code: ErrorCode.PermissionDenied,
        message: 'Permission denied: this tool needs file:write',
        data: { permission: 'file:write' },
      });
    });

    it('turns any other handler error into a bare Internal error', async () => {
      await bus.consume(
        async () => {
          throw new Error('secret detail: /etc/shadow');
        },
        { concurrency: 1 },
      );
      const err = await bus.call(makeJob(), never()).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ProtocolError);
      expect(err).toMatchObject({ code: ErrorCode.InternalError, message: 'Internal error' });
    });

    it('publishes each job lifecycle event once, with argument shapes and no values', async () => {
      const events: BusEvent[] = [];
      bus.subscribe((e) => events.push(e));
      await bus.consume(
        async (job) => {
          if ((job.args as { fail?: boolean }).fail) throw new ProtocolError(ErrorCode.InvalidParams, 'bad arguments');
          return textResult('fine');
        },
        { concurrency: 1 },
      );
      const ok = makeJob({ args: { path: 'secret-value' } });
      await bus.call(ok, never());
      const bad = makeJob({ args: { fail: true } });
      await expect(bus.call(bad, never())).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
      const of = (id: string) => events.filter((e) => 'jobId' in e && e.jobId === id);
      await until(() => of(bad.id).some((e) => e.type === 'job.failed'), 'job.failed');
      await new Promise((r) => setTimeout(r, 200)); // any duplicate would arrive by now
      expect(of(ok.id).map((e) => e.type)).toEqual(['job.enqueued', 'job.started', 'job.completed']);
      expect(of(bad.id).map((e) => e.type)).toEqual(['job.enqueued', 'job.started', 'job.failed']);
      expect(of(ok.id)[0]).toMatchObject({ tenant: 'alice', tool: 'echo', args: { path: 'string(12)' } });
      expect(of(ok.id)[2]).toMatchObject({ isError: false, durationMs: expect.any(Number) });
      expect(of(bad.id)[2]).toMatchObject({ code: ErrorCode.InvalidParams, reason: 'bad arguments', durationMs: expect.any(Number) });
      expect(JSON.stringify(events)).not.toContain('secret-value');
    });

    // Only a bus that spans processes has a peer to deliver to; the in-process bus registers no such test.
    const acrossProcesses = under.peer ? it : () => undefined;
    acrossProcesses('delivers events to another process on the bus, both ways', async () => {
      const peer = await open(() => under.peer!());
      const atPeer: BusEvent[] = [];
      peer.subscribe((e) => atPeer.push(e));
      await bus.consume(async () => textResult('fine'), { concurrency: 1 });
      const job = makeJob();
      await bus.call(job, never());
      await until(() => atPeer.filter((e) => 'jobId' in e && e.jobId === job.id).length === 3, 'three lifecycle events at the peer');
      expect(atPeer.map((e) => e.type)).toEqual(['job.enqueued', 'job.started', 'job.completed']);

      const here: BusEvent[] = [];
      bus.subscribe((e) => here.push(e));
      const event: BusEvent = { type: 'sandbox.started', tenant: 'alice', backend: 'none', at: Date.now(), startMs: 12 };
      peer.publish(event);
      await until(() => here.length > 0, 'the peer event');
      expect(here).toEqual([event]);
    });

    it('records revocations, keeps the latest cut-off and announces them', async () => {
      const events: BusEvent[] = [];
      bus.subscribe((e) => events.push(e));
      expect(bus.revocations.notBefore('alice')).toBeUndefined();
      await bus.revocations.revoke('alice', 1000);
      expect(bus.revocations.notBefore('alice')).toBe(1000);
      await bus.revocations.revoke('alice', 500);
      expect(bus.revocations.notBefore('alice')).toBe(1000);
      expect(bus.revocations.notBefore('bob')).toBeUndefined();
      await until(() => events.some((e) => e.type === 'token.revoked' && e.id === 'alice' && e.notBefore === 1000), 'token.revoked');
      if (!under.peer) return;
      const peer = await open(() => under.peer!());
      expect(peer.revocations.notBefore('alice')).toBe(1000); // loaded at start
      await bus.revocations.revoke('alice', 2000);
      await until(() => peer.revocations.notBefore('alice') === 2000, 'the peer to learn the new cut-off');
    });

    it('fails pending calls on close — OutcomeUnknown if started, Unavailable if not — and every call after it', async () => {
      let started = 0;
      await bus.consume(
        waitForAbort(() => started++),
        { concurrency: 1 },
      );
      // Settled before the test looks at them: catch now so they never count as unhandled.
      const running = bus.call(makeJob(), never()).catch((e: unknown) => e);
      const waiting = bus.call(makeJob(), never()).catch((e: unknown) => e);
      await until(() => started === 1, 'the first call to start');
      await bus.close();
      // The running call may have done part of its work: not safe to retry. The waiting one never ran.
      expect(await running).toMatchObject({ code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(/shutting down.*may have run/) });
      expect(await waiting).toMatchObject({ code: ErrorCode.Unavailable, message: expect.stringMatching(/shutting down.*did not run/) });
      await expect(bus.call(makeJob(), never())).rejects.toMatchObject({ code: ErrorCode.Unavailable });
      expect(await bus.ready()).toBe(false);
    });

    it('a closed consumer takes no more calls', async () => {
      const consumer = await bus.consume(async () => textResult('fine'), { concurrency: 1 });
      await bus.call(makeJob(), never());
      await consumer.close();
      await expect(bus.call(makeJob({ startBy: Date.now() + 300 }), never())).rejects.toMatchObject({ code: ErrorCode.Unavailable });
    });

    it('closing a consumer lets running calls finish within the grace, then aborts them', async () => {
      let started = 0;
      const consumer = await bus.consume(
        async (job, control) => {
          started++;
          if ((job.args as { quick?: boolean }).quick) return (await new Promise((r) => setTimeout(r, 100)), textResult('quick'));
          return waitForAbort(() => undefined)(job, control);
        },
        { concurrency: 2 },
      );
      const quick = bus.call(makeJob({ args: { quick: true } }), never());
      const slow = bus.call(makeJob(), never()).catch((e: unknown) => e);
      await until(() => started === 2, 'both calls to start');
      await consumer.close(300);
      expect(textOf(await quick)).toBe('quick');
      expect(await slow).toMatchObject({ code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(/shutting down.*may have run/) });
    });
  });
}
