/**
 * Per-identity limits: calls per minute (fixed one-minute windows) and calls in flight at once.
 * A refusal is JSON-RPC -32004 with HTTP 200 and `data.retryAfterMs`; other identities are not
 * affected. The counters are the in-memory quota store here; the same limiter on the Redis
 * store, shared by two gateway processes, is test/gateway/cluster-limits.test.ts.
 */
import type { ToolResult } from '../../shared/tools/tool';
import { CONCURRENCY_RETRY_MS, RateLimitedRunner, RateLimiter, REFUSAL_DELAY_MS } from '../../gateway/rate-limit';
import type { Caller } from '../../shared/auth/permissions';
import type { AnyTool } from '../../shared/tools/tool';
import { ProtocolError } from '../../shared/protocol/errors';
import { MemoryQuotaStore } from '../../shared/quota/memory';
import { json, startTestGateway, TestGateway } from './harness';

const refusal = async (p: Promise<unknown>): Promise<ProtocolError> => {
  try {
    await p;
  } catch (err) {
    return err as ProtocolError;
  }
  throw new Error('expected a refusal');
};

describe('RateLimiter', () => {
  test("per minute: a minute's budget, then -32004 with the time until the window ends; identities apart", async () => {
    const limiter = new RateLimiter({ maxConcurrent: 100, perMinute: 3 }, new MemoryQuotaStore());
    for (let i = 0; i < 3; i++) (await limiter.acquire('a'))();
    const err = await refusal(limiter.acquire('a'));
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err.code).toBe(-32004);
    expect(err.data).toEqual({ limit: 'perMinute', max: 3, retryAfterMs: expect.any(Number) });
    const retry = (err.data as { retryAfterMs: number }).retryAfterMs;
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(60_000);
    expect(err.message).toMatch(new RegExp(`retry after ${retry} ms`));
    (await limiter.acquire('b'))(); // another identity has its own budget
  });

  test('concurrent: at most maxConcurrent held at once; releasing frees a slot; release is idempotent', async () => {
    const limiter = new RateLimiter({ maxConcurrent: 2, perMinute: 1000 }, new MemoryQuotaStore());
    const r1 = await limiter.acquire('a');
    await limiter.acquire('a');
    const err = await refusal(limiter.acquire('a'));
    expect(err.data).toEqual({ limit: 'concurrent', max: 2, retryAfterMs: CONCURRENCY_RETRY_MS });
    r1();
    r1();
    await new Promise((r) => setImmediate(r));
    await limiter.acquire('a');
    expect((await refusal(limiter.acquire('a'))).code).toBe(-32004);
  });

  test('a refused call uses no per-minute budget', async () => {
    const limiter = new RateLimiter({ maxConcurrent: 1, perMinute: 2 }, new MemoryQuotaStore());
    const r = await limiter.acquire('a');
    for (let i = 0; i < 5; i++) expect((await refusal(limiter.acquire('a'))).data).toMatchObject({ limit: 'concurrent' });
    r();
    (await limiter.acquire('a'))();
    expect((await refusal(limiter.acquire('a'))).data).toMatchObject({ limit: 'perMinute' });
  });

  test('idle identities leave nothing behind in the lease table', async () => {
    const store = new MemoryQuotaStore();
    const limiter = new RateLimiter({ maxConcurrent: 5, perMinute: 60 }, store);
    (await limiter.acquire('idle'))();
    await limiter.acquire('busy');
    await new Promise((r) => setImmediate(r));
    expect(store.trackedKeys).toBe(1);
  });
});

describe('RateLimitedRunner', () => {
  const caller: Caller = { tenant: 'spinner', permissions: new Set() };
  const tool = { name: 'read_file' } as AnyTool;
  const held: Array<() => void> = [];
  const inner = {
    run: () => new Promise<ToolResult>((resolve) => held.push(() => resolve({ content: [] }))),
    close: async () => undefined,
  };

  test('answers a refusal only after the retry hint (at most REFUSAL_DELAY_MS), or at once when the caller leaves', async () => {
    const runner = new RateLimitedRunner(inner, new RateLimiter({ maxConcurrent: 1, perMinute: 1000 }, new MemoryQuotaStore()));
    const first = runner.run(tool, {}, caller, new AbortController().signal);
    const t0 = performance.now();
    const err = await refusal(runner.run(tool, {}, caller, new AbortController().signal));
    expect(err.data).toMatchObject({ limit: 'concurrent' });
    // A lower bound only (load can only make it longer): a spinning client is slowed to this pace.
    expect(performance.now() - t0).toBeGreaterThanOrEqual(Math.min(REFUSAL_DELAY_MS, CONCURRENCY_RETRY_MS) - 5);
    const gone = new AbortController();
    gone.abort();
    const t1 = performance.now();
    await refusal(runner.run(tool, {}, caller, gone.signal));
    expect(performance.now() - t1).toBeLessThan(REFUSAL_DELAY_MS);
    held.splice(0).forEach((f) => f());
    await first;
  });
});

describe('limits over HTTP', () => {
  let gw: TestGateway;
  let held: Array<() => void> = [];
  beforeAll(async () => {
    gw = await startTestGateway({
      env: { TOOLGATE_CALLS_PER_MINUTE: '3', TOOLGATE_MAX_CONCURRENT_CALLS: '2' },
      // Jobs wait until the test lets them finish, so "running at once" is under the test's control.
      handler: (job) => new Promise<ToolResult>((resolve) => held.push(() => resolve({ content: [{ type: 'text', text: `done ${job.tool}` }] }))),
    });
  });
  afterAll(async () => {
    held.forEach((f) => f());
    await gw?.close();
  });
  const release = () => {
    const all = held;
    held = [];
    all.forEach((f) => f());
  };
  const call = (id: string, token = gw.token({ id })) =>
    gw.post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'x' } } }, { token });
  const startedCount = (tenant: string) => gw.events.filter((e) => e.type === 'job.started' && e.tenant === tenant).length;
  const until = async (check: () => boolean) => {
    while (!check()) await new Promise((r) => setTimeout(r, 5));
  };

  test('the 4th call in a minute → -32004 with HTTP 200 and retryAfterMs; another identity and tools/list are unaffected', async () => {
    const token = gw.token({ id: 'minute' });
    for (let i = 0; i < 3; i++) {
      const pending = call('minute', token);
      await until(() => held.length > 0);
      release();
      expect((await json(await pending)).result.content[0].text).toBe('done read_file');
    }
    const before = gw.events.length;
    const res = await call('minute', token);
    expect(res.status).toBe(200);
    const reply = await json(res);
    expect(reply.error).toMatchObject({ code: -32004, data: { limit: 'perMinute', max: 3, retryAfterMs: expect.any(Number) } });
    expect(reply.error.message).toMatch(/per minute/);
    expect(gw.events.length).toBe(before); // refused before the bus

    expect((await json(await gw.post({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }, { token }))).result.tools.length).toBeGreaterThan(0);
    const other = call('someone-else');
    await until(() => held.length > 0);
    release();
    expect((await json(await other)).result).toBeDefined();
  });

  test('a 3rd concurrent call → -32004 (concurrent); once one finishes, the next is served', async () => {
    const first = call('busy');
    const second = call('busy');
    await until(() => startedCount('busy') === 2);
    const third = await json(await call('busy'));
    expect(third.error).toMatchObject({ code: -32004, data: { limit: 'concurrent', max: 2, retryAfterMs: expect.any(Number) } });
    release();
    expect((await json(await first)).result).toBeDefined();
    expect((await json(await second)).result).toBeDefined();
    const fourth = call('busy');
    await until(() => held.length > 0);
    release();
    expect((await json(await fourth)).result).toBeDefined();
  });

  test('in one batch, each call over the limit gets its own -32004 and the rest run', async () => {
    const batch = gw.post(
      [1, 2, 3].map((id) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'x' } } })),
      { token: gw.token({ id: 'batcher' }) },
    );
    await until(() => startedCount('batcher') === 2);
    release();
    const replies: Array<{ id: number; result?: unknown; error?: { code: number } }> = await json(await batch);
    expect(replies.map((r) => r.id).sort()).toEqual([1, 2, 3]);
    expect(replies.filter((r) => r.result).length).toBe(2);
    expect(replies.filter((r) => r.error?.code === -32004).length).toBe(1);
  });
});
