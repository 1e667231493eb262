/**
 * The contract every task store passes (in memory, Redis): creation under the live-task limit,
 * tenant scoping (another identity sees nothing), status lines, one end per task (finish after
 * cancel keeps `cancelled`, a second finish changes nothing), results kept exactly (empty arrays
 * included), TTL expiry, and paging.
 */
import { randomUUID } from 'node:crypto';
import { BadCursor, TaskRecord, TaskStore } from '../../shared/tasks/task-store';

export interface TaskStoreUnderTest {
  create(): Promise<TaskStore>;
  /** Another store on the same backend, as another gateway process holds it (absent: one process). */
  peer?(): Promise<TaskStore>;
}

const task = (overrides: Partial<TaskRecord> = {}): TaskRecord => {
  const now = Date.now();
  return {
    taskId: randomUUID(),
    tenant: 'alice',
    tool: 'run_command',
    status: 'working',
    createdAt: now,
    lastUpdatedAt: now,
    ttlMs: 60_000,
    pollIntervalMs: 1000,
    ...overrides,
  };
};

export function taskStoreContract(name: string, under: TaskStoreUnderTest): void {
  describe(`task store contract: ${name}`, () => {
    let store: TaskStore;
    beforeEach(async () => {
      store = await under.create();
    });

    it('creates a working task its tenant can read, and nobody else can', async () => {
      const t = task();
      expect(await store.create(t, 10)).toBe(true);
      expect(await store.get('alice', t.taskId)).toMatchObject({ taskId: t.taskId, status: 'working', tool: 'run_command', ttlMs: 60_000 });
      expect(await store.get('mallory', t.taskId)).toBeUndefined();
      expect(await store.get('alice', randomUUID())).toBeUndefined();
      expect(await store.cancel('mallory', t.taskId)).toBeUndefined();
      expect((await store.get('alice', t.taskId))?.status).toBe('working');
    });

    it("refuses a task past the tenant's live limit; ended tasks do not count, other tenants are unaffected", async () => {
      const tenant = `limit-${randomUUID()}`;
      const a = task({ tenant });
      const b = task({ tenant });
      expect(await store.create(a, 2)).toBe(true);
      expect(await store.create(b, 2)).toBe(true);
      expect(await store.create(task({ tenant }), 2)).toBe(false);
      expect(await store.create(task({ tenant: `other-${tenant}` }), 2)).toBe(true);
      await store.finish(a.taskId, { result: { content: [] } });
      expect(await store.create(task({ tenant }), 2)).toBe(true);
    });

    it('keeps the newest status line of a working task', async () => {
      const t = task();
      await store.create(t, 10);
      await store.note(t.taskId, 'step 1');
      await store.note(t.taskId, 'step 2 of 10');
      const read = await store.get('alice', t.taskId);
      expect(read?.statusMessage).toBe('step 2 of 10');
      expect(read!.lastUpdatedAt).toBeGreaterThanOrEqual(t.lastUpdatedAt);
    });

    it('keeps a result exactly (empty arrays and objects, unicode) and ends once', async () => {
      const t = task();
      await store.create(t, 10);
      const result = {
        content: [{ type: 'text' as const, text: 'done ✓' }],
        structuredContent: { entries: [], nested: { empty: {}, list: [1, 'two', null] } },
      };
      await store.finish(t.taskId, { result });
      await store.finish(t.taskId, { error: { code: -32006, message: 'late' } });
      await store.note(t.taskId, 'too late');
      const read = await store.get('alice', t.taskId);
      expect(read).toMatchObject({ status: 'completed', result });
      expect(read?.error).toBeUndefined();
      expect(read?.statusMessage).toBeUndefined();
    });

    it('records a failure with its JSON-RPC error and reason', async () => {
      const t = task();
      await store.create(t, 10);
      await store.finish(t.taskId, { error: { code: -32006, message: 'Unavailable: the executor died', data: { list: [] } } });
      expect(await store.get('alice', t.taskId)).toMatchObject({
        status: 'failed',
        error: { code: -32006, data: { list: [] } },
        statusMessage: 'Unavailable: the executor died',
      });
    });

    it('a cancelled task stays cancelled when its call ends afterwards', async () => {
      const t = task();
      await store.create(t, 10);
      expect(await store.cancel('alice', t.taskId)).toMatchObject({ status: 'cancelled' });
      await store.finish(t.taskId, { result: { content: [] } });
      expect(await store.get('alice', t.taskId)).toMatchObject({ status: 'cancelled' });
      expect((await store.get('alice', t.taskId))?.result).toBeUndefined();
      // Cancelling an ended task changes nothing and returns it as it is.
      expect(await store.cancel('alice', t.taskId)).toMatchObject({ status: 'cancelled' });
    });

    it('forgets a task after its TTL', async () => {
      const t = task({ ttlMs: 200 });
      await store.create(t, 10);
      const end = Date.now() + 5000;
      while ((await store.get('alice', t.taskId)) !== undefined) {
        if (Date.now() > end) throw new Error('the task outlived its TTL');
        await new Promise((r) => setTimeout(r, 50));
      }
    });

    it("lists a tenant's tasks newest first, in pages, and refuses a cursor it did not make", async () => {
      const tenant = `list-${randomUUID()}`;
      const made: TaskRecord[] = [];
      for (let i = 0; i < 5; i++) {
        const t = task({ tenant, createdAt: 1_000_000 + i });
        made.push(t);
        await store.create(t, 10);
      }
      await store.create(task({ tenant: `not-${tenant}` }), 10);
      const first = await store.list(tenant, undefined, 2);
      expect(first.tasks.map((t) => t.taskId)).toEqual([made[4]!.taskId, made[3]!.taskId]);
      const second = await store.list(tenant, first.nextCursor, 2);
      const third = await store.list(tenant, second.nextCursor, 2);
      expect([...first.tasks, ...second.tasks, ...third.tasks].map((t) => t.taskId)).toEqual(made.map((t) => t.taskId).reverse());
      expect(third.nextCursor).toBeUndefined();
      await expect(store.list(tenant, 'garbage', 2)).rejects.toBeInstanceOf(BadCursor);
    });

    if (under.peer) {
      it('another process sees the same task, and an end written there', async () => {
        const other = await under.peer!();
        const t = task();
        await store.create(t, 10);
        expect(await other.get('alice', t.taskId)).toMatchObject({ status: 'working' });
        await other.finish(t.taskId, { result: { content: [{ type: 'text', text: 'from the executor' }] } });
        expect(await store.get('alice', t.taskId)).toMatchObject({ status: 'completed' });
      });
    }
  });
}
