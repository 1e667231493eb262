/**
 * The fair share of shards, from one look at Redis (no I/O): shares that add up to the shards,
 * a newcomer's share taken from the fullest executors, free shards never left unserved, and
 * hand-overs only to an executor that lacks shards and reaches the same workspaces.
 */
import type { LiveExecutor } from '../../shared/bus/live-executors';
import { planShare, ShareView } from '../../shared/bus/shard-share';

const ALL = [0, 1, 2, 3];
const ex = (id: string, shards: readonly number[] = ALL, dataDir = 'shared'): LiveExecutor => ({ id, shards, dataDir });

/** The view of `self` when `holding` maps executor ids to the shards they hold. */
function view(self: LiveExecutor, live: LiveExecutor[], holding: Record<string, number[]>, handing: number[] = []): ShareView {
  const holders = new Map<number, string>();
  for (const [id, shards] of Object.entries(holding)) for (const s of shards) holders.set(s, id);
  return { self, live, holders, held: new Set(holding[self.id] ?? []), handing: new Set(handing) };
}

describe('planShare', () => {
  it('alone, an executor takes every shard', () => {
    const a = ex('a');
    expect(planShare(view(a, [a], {}))).toEqual({ share: 4, wanted: [], room: 4, orphans: ALL, handOver: [] });
  });

  it('two starting together: two each, neither hands anything over', () => {
    const [a, b] = [ex('a'), ex('b')];
    expect(planShare(view(a, [a, b], {}))).toMatchObject({ share: 2, wanted: ALL, room: 2, orphans: [], handOver: [] });
    // a has its share: nobody else would take the other two.
    expect(planShare(view(b, [a, b], { a: [0, 1] }))).toMatchObject({ share: 2, orphans: [2, 3], handOver: [] });
  });

  it('a newcomer: the holder of all four hands two over; then a third takes one from the fullest (2/1/1)', () => {
    const [a, b, c] = [ex('a'), ex('b'), ex('c')];
    expect(planShare(view(a, [a, b], { a: ALL }))).toMatchObject({ share: 2, handOver: [3, 2] });
    // While the two are handed over, no more.
    expect(planShare(view(a, [a, b], { a: ALL }, [3, 2]))).toMatchObject({ share: 2, handOver: [] });
    expect(planShare(view(b, [a, b], { a: ALL }))).toMatchObject({ share: 2, room: 2, wanted: [] });

    // c arrives: a and b hold two each; a ranks first (ties by id) and keeps two, b gives one.
    const holding = { a: [0, 1], b: [2, 3] };
    expect(planShare(view(a, [a, b, c], holding))).toMatchObject({ share: 2, handOver: [] });
    expect(planShare(view(b, [a, b, c], holding))).toMatchObject({ share: 1, handOver: [3] });
    expect(planShare(view(c, [a, b, c], holding))).toMatchObject({ share: 1, room: 1, wanted: [] });
    expect(planShare(view(c, [a, b, c], { a: [0, 1], b: [2] }))).toMatchObject({ share: 1, room: 1, orphans: [3] });
    // Balanced: nobody moves.
    for (const e of [a, b, c]) expect(planShare(view(e, [a, b, c], { a: [0, 1], b: [2], c: [3] }))).toMatchObject({ room: 0, handOver: [], orphans: [] });
  });

  it('an executor gone: the survivors share its shards (the dead one is no longer live)', () => {
    const [b, c] = [ex('b'), ex('c')];
    // a held 0 and 1; its leases expired with its live entry.
    expect(planShare(view(b, [b, c], { b: [2], c: [3] }))).toMatchObject({ share: 2, room: 1, wanted: [0, 1] });
    expect(planShare(view(c, [b, c], { b: [2], c: [3] }))).toMatchObject({ share: 2, room: 1, wanted: [0, 1] });
  });

  it('a free shard that only executors at their share can serve is taken anyway (never left unserved)', () => {
    // b is a candidate for 0 and 1 only and holds them; a holds 2 and has its share (2 of 4 over 2).
    const [a, b] = [ex('a'), ex('b', [0, 1])];
    expect(planShare(view(a, [a, b], { a: [2], b: [0, 1] }))).toMatchObject({ share: 2, room: 1, wanted: [], orphans: [3] });
    const plan = planShare(view(a, [a, b], { a: [2, 3], b: [0, 1] }));
    expect(plan).toMatchObject({ room: 0, orphans: [], handOver: [] });
  });

  it('hands over only what a lacking executor is a candidate for', () => {
    // a took everything; b can serve 0 and 1 only.
    const [a, b] = [ex('a'), ex('b', [0, 1])];
    expect(planShare(view(a, [a, b], { a: ALL }))).toMatchObject({ share: 2, handOver: [1, 0] });
  });

  it('never hands over to an executor on another data directory (its tenants would lose their workspaces)', () => {
    const [a, b] = [ex('a', ALL, 'dir-a'), ex('b', ALL, 'dir-b')];
    expect(planShare(view(a, [a, b], { a: ALL }))).toMatchObject({ share: 2, handOver: [] });
    // …but free shards still spread between them.
    expect(planShare(view(b, [a, b], { a: [0, 1] }))).toMatchObject({ share: 2, orphans: [2, 3] });
  });

  it('five shards over two: 3 and 2, the larger share to the one holding more', () => {
    const [a, b] = [ex('a', [0, 1, 2, 3, 4]), ex('b', [0, 1, 2, 3, 4])];
    expect(planShare(view(b, [a, b], { a: [0, 1], b: [2, 3, 4] }))).toMatchObject({ share: 3, handOver: [], room: 0 });
    expect(planShare(view(a, [a, b], { a: [0, 1], b: [2, 3, 4] }))).toMatchObject({ share: 2, handOver: [], room: 0 });
  });
});
