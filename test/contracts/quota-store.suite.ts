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

    it('grants exactly max of many concurrent requests (atomic)', async () => {
      const got = await Promise.all(Array.from({ length: 40 }, () => store.lease('race', 7)));
      expect(got.filter(Boolean).length).toBe(7);
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
