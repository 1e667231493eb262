/**
 * The contract every quota store must pass (memory, Redis): a per-minute budget per key, leases
 * capped per key and released exactly once, release notices, and — where two processes can
 * share the store — one budget and one lease count between them. Run from one small .test.ts
 * per implementation.
 */
import type { QuotaStore } from '../../shared/quota/store';

export interface QuotaStoreUnderTest {
  /** A fresh store on a clean backend. */
  create(): Promise<QuotaStore>;
  /** Another store on the same backend, as a second gateway process would hold (absent: one process only). */
  peer?(): Promise<QuotaStore>;
  reset?(): Promise<void>;
}

const tick = () => new Promise((r) => setTimeout(r, 0));

export function quotaStoreContract(name: string, under: QuotaStoreUnderTest): void {
  describe(`quota store contract: ${name}`, () => {
    const opened: QuotaStore[] = [];
    let store: QuotaStore;
    const open = async (make: () => Promise<QuotaStore>) => {
      const s = await make();
      opened.push(s);
      return s;
    };
    beforeEach(async () => {
      store = await open(() => under.create());
    });
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
      await under.reset?.();
    });

    it('spends a budget of perMinute per key, then refuses with the time until the window ends', async () => {
      for (let i = 0; i < 5; i++) expect(await store.spend('k', 5)).toEqual({ allowed: true, retryAfterMs: 0 });
      const refused = await store.spend('k', 5);
      expect(refused.allowed).toBe(false);
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(60_000);
      expect((await store.spend('other', 5)).allowed).toBe(true);
    });

    it('grants at most max leases per key, counts them, and frees one on release (once)', async () => {
      const a = await store.lease('l', 2);
      const b = await store.lease('l', 2);
      expect(a).toBeDefined();
      expect(b).toBeDefined();
      expect(await store.lease('l', 2)).toBeUndefined();
      expect(await store.held('l')).toBe(2);
      expect(await store.lease('elsewhere', 2)).toBeDefined();
      await a!.release();
      await a!.release();
      expect(await store.held('l')).toBe(1);
      expect(await store.lease('l', 2)).toBeDefined();
      expect(await store.lease('l', 2)).toBeUndefined();
    });

    it('a release asked for, even not awaited, is seen by every operation asked for after it', async () => {
      const a = await store.lease('ordered', 1);
      void a!.release();
      expect(await store.held('ordered')).toBe(0);
      const b = await store.lease('ordered', 1);
      expect(b).toBeDefined();
      void b!.release();
      expect(await store.enter({ lease: { key: 'ordered', max: 1 }, budget: { key: 'ordered', perMinute: 10 } })).toMatchObject({ allowed: true });
    });

    it('grants exactly max of many concurrent requests (atomic)', async () => {
      const got = await Promise.all(Array.from({ length: 40 }, () => store.lease('race', 7)));
      expect(got.filter(Boolean).length).toBe(7);
    });

    describe('enter: a lease, a unit of budget and an optional second lease in one step', () => {
      const entry = (max: number, perMinute: number, extraMax?: number) => ({
        lease: { key: 'in-flight', max },
        budget: { key: 'in-flight', perMinute },
        ...(extraMax === undefined ? {} : { extra: { key: 'admitted', max: extraMax } }),
      });

      it('takes the lease and spends on the same counters as lease and spend', async () => {
        const first = await store.enter(entry(2, 3));
        expect(first).toMatchObject({ allowed: true });
        expect(await store.held('in-flight')).toBe(1);
        expect((await store.spend('in-flight', 3)).allowed).toBe(true);
        expect((await store.spend('in-flight', 3)).allowed).toBe(true); // the third unit
        const refused = await store.enter(entry(2, 3));
        expect(refused).toMatchObject({ allowed: false, refused: 'budget' });
        expect(!refused.allowed && refused.refused === 'budget' && refused.retryAfterMs).toBeGreaterThan(0);
        // A budget refusal takes no lease.
        expect(await store.held('in-flight')).toBe(1);
        if (first.allowed) await first.lease.release();
        expect(await store.held('in-flight')).toBe(0);
      });

      it('refuses a full lease before spending anything', async () => {
        const held = await store.lease('in-flight', 1);
        for (let i = 0; i < 4; i++) expect(await store.enter(entry(1, 2))).toEqual({ allowed: false, refused: 'lease' });
        await held!.release();
        expect(await store.enter(entry(1, 2))).toMatchObject({ allowed: true });
        expect((await store.spend('in-flight', 2)).allowed).toBe(true); // only one unit was spent before
        expect((await store.spend('in-flight', 2)).allowed).toBe(false);
      });

      it('takes the second lease only while one is free, and a full one refuses nothing', async () => {
        const a = await store.enter(entry(5, 100, 1));
        const b = await store.enter(entry(5, 100, 1));
        expect(a.allowed && a.extra).toBeTruthy();
        expect(b).toMatchObject({ allowed: true });
        expect(b.allowed && b.extra).toBeFalsy();
        expect(await store.held('admitted')).toBe(1);
        expect(await store.held('in-flight')).toBe(2);
        if (a.allowed) await a.extra!.release();
        expect(await store.held('admitted')).toBe(0);
      });

      it('grants exactly max of many concurrent entries (atomic), each lease and budget once', async () => {
        const got = await Promise.all(Array.from({ length: 30 }, () => store.enter(entry(100, 1000, 4))));
        expect(got.every((v) => v.allowed)).toBe(true);
        expect(got.filter((v) => v.allowed && v.extra).length).toBe(4);
        expect(await store.held('in-flight')).toBe(30);
        const racing = await Promise.all(
          Array.from({ length: 30 }, () => store.enter({ lease: { key: 'race-entry', max: 6 }, budget: { key: 'race-entry', perMinute: 1000 } })),
        );
        expect(racing.filter((v) => v.allowed).length).toBe(6);
      });
    });

    it('tells release listeners which key was released', async () => {
      const seen: string[] = [];
      store.onRelease((key) => seen.push(key));
      const lease = await store.lease('notice', 1);
      await lease!.release();
      const until = Date.now() + 5000;
      while (!seen.includes('notice') && Date.now() < until) await tick();
      expect(seen).toContain('notice');
    });

    it('closing a store releases the leases it held', async () => {
      const other = await under.create();
      await other.lease('closing', 1);
      expect(await store.held('closing')).toBe(under.peer ? 1 : 0);
      await other.close();
      expect(await store.held('closing')).toBe(0);
    });

    if (under.peer) {
      it('two processes share one budget and one lease count', async () => {
        const peer = await open(() => under.peer!());
        const spends = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? store : peer).spend('shared', 12)));
        expect(spends.filter((v) => v.allowed).length).toBe(12);
        const leases = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? store : peer).lease('shared-lease', 5)));
        expect(leases.filter(Boolean).length).toBe(5);
        expect(await peer.held('shared-lease')).toBe(5);
        const entries = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            (i % 2 ? store : peer).enter({
              lease: { key: 'shared-entry', max: 50 },
              budget: { key: 'shared-entry', perMinute: 9 },
              extra: { key: 'shared-extra', max: 3 },
            }),
          ),
        );
        expect(entries.filter((v) => v.allowed).length).toBe(9);
        expect(entries.filter((v) => v.allowed && v.extra).length).toBe(3);
        expect(await peer.held('shared-entry')).toBe(9);
      });

      it("a release in one process is announced to the other's listeners", async () => {
        const peer = await open(() => under.peer!());
        const seen: string[] = [];
        peer.onRelease((key) => seen.push(key));
        await (await store.lease('across', 1))!.release();
        const until = Date.now() + 5000;
        while (!seen.includes('across') && Date.now() < until) await tick();
        expect(seen).toContain('across');
      });
    }
  });
}
