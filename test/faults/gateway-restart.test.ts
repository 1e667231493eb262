/**
 * Fault: the gateway restarted under load. Real processes: redis-server, `toolgate serve` on
 * BullMQ, a `toolgate executor`; 8 callers call back to back, each call appending its own
 * unique value to a ledger file in the workspace and echoing it. The gateway is stopped —
 * crashed (SIGKILL) or shut down (SIGTERM) — and started again on the same port. The promise
 * (gateway issue): during the restart callers get errors (connection refused), never a hang;
 * no call runs twice (every value is in the ledger at most once, and every acknowledged value
 * exactly once); after it comes back every call succeeds again.
 */
import { ErrorCode } from '../../shared/protocol/errors';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { Answer, eventually, FaultStack, note, sleep } from './stack';

jest.setTimeout(60_000);

const CALLERS = 8;
const LEDGER = 'ledger.txt';

interface Made {
  value: string;
  answer: Answer;
  /** When the call started, relative to the restart: before the stop, while down, after ready. */
  phase: 'before' | 'down' | 'after';
}

describeRedis('fault: the gateway restarted under load', () => {
  let redis: TestRedis;
  let stack: FaultStack;

  beforeAll(async () => {
    redis = await startRedis();
    stack = await FaultStack.start({ redis, executors: 1 });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await redis?.close();
  });

  it.each(['SIGKILL', 'SIGTERM'] as const)('%s: errors during the restart, nothing runs twice, everything succeeds after', async (signal) => {
    // One identity for both runs (the executor runs on `none`, which serves one identity), a ledger each.
    const tenant = 'restart';
    const ledgerFile = `${signal}-${LEDGER}`;
    const token = stack.token(tenant);
    const made: Made[] = [];
    let phase: Made['phase'] = 'before';
    let stop = false;
    const caller = async (k: number) => {
      for (let seq = 0; !stop; seq++) {
        const value = `${signal}-${k}-${seq}`;
        const startedIn = phase;
        const answer = await stack.call(token, 'run_command', { command: `echo ${value} >> ${ledgerFile}; echo ${value}` }, { id: value, timeoutMs: 15_000 });
        made.push({ value, answer, phase: startedIn });
        // A refused connection fails at once: do not spin while the gateway is down.
        if ('failure' in answer) await sleep(50);
      }
    };
    const callers = Array.from({ length: CALLERS }, (_, k) => caller(k));

    await sleep(700);
    const stoppedAt = performance.now();
    phase = 'down';
    await stack.kill(stack.gateway!, signal);
    await sleep(1000);
    await stack.startGateway();
    const downMs = performance.now() - stoppedAt;
    phase = 'after';
    await eventually(() => made.filter((m) => m.phase === 'after').length >= 2 * CALLERS, 'calls after the restart', 20_000);
    stop = true;
    await Promise.all(callers);

    const ok = (m: Made) =>
      'reply' in m.answer &&
      m.answer.reply.id === m.value &&
      (m.answer.reply.result?.structuredContent as { stdout?: string } | undefined)?.stdout === `${m.value}\n`;
    const failures = made.filter((m) => !ok(m));
    // Errors, not hangs: no call took anywhere near its 15 s deadline.
    expect(made.filter((m) => 'failure' in m.answer && /Timeout/.test(m.answer.failure))).toEqual([]);
    // While down: connection refused. Around the stop: a dropped connection or the gateway's own
    // Unavailable (a graceful stop's drain) — and nothing else.
    expect(made.filter((m) => m.phase === 'down').some((m) => 'failure' in m.answer && m.answer.failure === 'ECONNREFUSED')).toBe(true);
    for (const m of failures) {
      if ('failure' in m.answer) expect(m.answer.failure).toMatch(/^(ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET|EPIPE)$/);
      else expect(m.answer.reply.error?.code).toBe(ErrorCode.Unavailable);
      expect(m.phase).not.toBe('after');
    }

    // Nothing ran twice; everything acknowledged ran exactly once.
    const ledger = stack.linesOf(tenant, ledgerFile);
    const counts = new Map<string, number>();
    for (const line of ledger) counts.set(line, (counts.get(line) ?? 0) + 1);
    expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
    for (const m of made) if (ok(m)) expect(counts.get(m.value)).toBe(1);
    expect(ledger.every((line) => made.some((m) => m.value === line))).toBe(true);

    // Back: every call made after the restart succeeded.
    const after = made.filter((m) => m.phase === 'after');
    expect(after.length).toBeGreaterThan(CALLERS);
    expect(after.filter((m) => !ok(m))).toEqual([]);
    const refused = failures.filter((m) => 'failure' in m.answer && m.answer.failure === 'ECONNREFUSED').length;
    note(
      `gateway restarted (${signal})`,
      `${made.length} calls, ${made.length - failures.length} ok, ${failures.length} errors (${refused} connection refused, others: ${[...new Set(failures.map((m) => ('failure' in m.answer ? m.answer.failure : String(m.answer.reply.error?.code))))].filter((c) => c !== 'ECONNREFUSED').join(', ') || 'none'}); down for ${Math.round(downMs)} ms; ledger ${ledger.length} lines, none twice; ${after.length} calls after the restart all ok`,
    );
  });
});
