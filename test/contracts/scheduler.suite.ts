/**
 * The contract every Scheduler must pass (in-process, Redis): at most `perTenant` admitted per
 * tenant, other tenants unaffected, a tenant's waiting calls admitted in arrival order as
 * admissions are released, a waiting call that is cancelled leaves the line without taking a
 * slot, and — where two gateways share the store — one count per tenant across both, with a
 * release in one admitting a waiter in the other.
 */
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import type { Admission, Scheduler } from '../../gateway/scheduling/scheduler';

export interface SchedulerUnderTest {
  /** A fresh scheduler with this share per tenant, on a clean backend. */
  create(perTenant: number): Promise<Scheduler>;
  /** Another scheduler on the same backend, as a second gateway would hold (absent: one process only). */
  peer?(perTenant: number): Promise<Scheduler>;
  reset?(): Promise<void>;
}

const never = () => new AbortController().signal;

/** Polls until `check` holds (admissions arrive asynchronously). */
async function until(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Starts an admit and records when (in order) it was granted. */
function track(scheduler: Scheduler, tenant: string, order: string[], label: string, signal = never()) {
  const entry: { admission?: Admission; error?: unknown } = {};
  const promise = scheduler.admit(tenant, signal).then(
    (a) => {
      entry.admission = a;
      order.push(label);
    },
    (err: unknown) => {
      entry.error = err;
    },
  );
  return { entry, promise };
}

export function schedulerContract(name: string, under: SchedulerUnderTest): void {
  describe(`scheduler contract: ${name}`, () => {
    const opened: Scheduler[] = [];
    const open = async (make: () => Promise<Scheduler>) => {
      const s = await make();
      opened.push(s);
      return s;
    };
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
      await under.reset?.();
    });

    it("offers a call its admission with its other counters only while none of its tenant's calls wait here", async () => {
      const scheduler = await open(() => under.create(1));
      expect(scheduler.entryFor('alice')).toEqual({ key: 'admitted:alice', max: 1 });
      const order: string[] = [];
      const first = track(scheduler, 'alice', order, 'first');
      await until(() => order.length === 1, 'the first admission');
      const second = track(scheduler, 'alice', order, 'second');
      // alice has a line here now: a new call must queue behind it, not take a slot itself.
      expect(scheduler.entryFor('alice')).toBeUndefined();
      expect(scheduler.entryFor('bob')).toEqual({ key: 'admitted:bob', max: 1 });
      first.entry.admission!.release();
      await second.promise;
      second.entry.admission!.release();
      await until(() => scheduler.entryFor('alice') !== undefined, "alice's line to empty");
      let released = 0;
      const adopted = scheduler.adopt({ release: async () => void released++ });
      adopted.release();
      adopted.release();
      expect(released).toBe(1);
      await scheduler.close();
      expect(scheduler.entryFor('carol')).toBeUndefined();
    });

    it('admits perTenant of one tenant at once; the rest wait, in arrival order; other tenants pass', async () => {
      const scheduler = await open(() => under.create(2));
      const order: string[] = [];
      const calls = ['a1', 'a2', 'a3', 'a4', 'a5'].map((label) => track(scheduler, 'noisy', order, label));
      await until(() => order.length === 2, 'two admissions');
      expect(order).toEqual(['a1', 'a2']);
      expect(scheduler.waiting().get('noisy')).toBe(3);

      const quiet = track(scheduler, 'quiet', order, 'q1');
      await quiet.promise;
      expect(order).toEqual(['a1', 'a2', 'q1']);

      calls[0]!.entry.admission!.release();
      calls[0]!.entry.admission!.release(); // idempotent: frees one slot, not two
      await until(() => order.length === 4, 'the third admission');
      expect(order).toEqual(['a1', 'a2', 'q1', 'a3']);
      calls[1]!.entry.admission!.release();
      calls[2]!.entry.admission!.release();
      await Promise.all(calls.map((c) => c.promise));
      expect(order).toEqual(['a1', 'a2', 'q1', 'a3', 'a4', 'a5']);
      for (const c of calls) c.entry.admission?.release();
      quiet.entry.admission!.release();
    });

    it('a waiting call that is cancelled leaves the line with its reason and takes no slot', async () => {
      const scheduler = await open(() => under.create(1));
      const order: string[] = [];
      const first = track(scheduler, 't', order, 'first');
      await first.promise;
      const controller = new AbortController();
      const cancelled = track(scheduler, 't', order, 'cancelled', controller.signal);
      const after = track(scheduler, 't', order, 'after');
      await until(() => scheduler.waiting().get('t') === 2, 'two waiting');
      const reason = new ProtocolError(ErrorCode.Cancelled, 'Request cancelled');
      controller.abort(reason);
      await cancelled.promise;
      expect(cancelled.entry.error).toBe(reason);
      first.entry.admission!.release();
      await after.promise;
      expect(order).toEqual(['first', 'after']);
      after.entry.admission!.release();
    });

    it('an already aborted signal is refused at once', async () => {
      const scheduler = await open(() => under.create(1));
      const controller = new AbortController();
      controller.abort(new ProtocolError(ErrorCode.Timeout, 'Timeout'));
      await expect(scheduler.admit('t', controller.signal)).rejects.toMatchObject({ code: ErrorCode.Timeout });
    });

    it('closing fails waiting calls Unavailable', async () => {
      const scheduler = await under.create(1);
      const held = await scheduler.admit('t', never());
      const waiting = scheduler.admit('t', never());
      await until(() => scheduler.waiting().get('t') === 1, 'one waiting');
      await scheduler.close();
      await expect(waiting).rejects.toMatchObject({ code: ErrorCode.Unavailable });
      held.release();
    });

    if (under.peer) {
      it("two gateways share each tenant's count; a release in one admits a waiter in the other", async () => {
        const one = await open(() => under.create(2));
        const two = await open(() => under.peer!(2));
        const order: string[] = [];
        const a = track(one, 'shared', order, 'one-1');
        const b = track(two, 'shared', order, 'two-1');
        await Promise.all([a.promise, b.promise]);
        const waiting = track(two, 'shared', order, 'two-2');
        const alsoWaiting = track(one, 'shared', order, 'one-2');
        await until(() => two.waiting().get('shared') === 1 && one.waiting().get('shared') === 1, 'one waiting in each');
        expect(order.length).toBe(2);
        a.entry.admission!.release();
        await until(() => order.length === 3, 'one more admission');
        b.entry.admission!.release();
        await Promise.all([waiting.promise, alsoWaiting.promise]);
        expect(order.slice(2).sort()).toEqual(['one-2', 'two-2']);
        waiting.entry.admission!.release();
        alsoWaiting.entry.admission!.release();
      });
    }
  });
}
