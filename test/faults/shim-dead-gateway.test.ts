/**
 * Fault: `toolgate shim` facing a dead gateway. The real shim binary speaks stdio to the test
 * (the agent's side) and HTTP to a real `toolgate serve` (embedded executor, none sandbox) on
 * 127.0.0.1 — which is not running, then running, then killed in the middle of a call, then
 * frozen (SIGSTOP: it accepts connections but never answers). The promise (gateway issue):
 * errors, no hang — every request gets a JSON-RPC error reply promptly, the shim keeps serving,
 * and when the gateway is back the next request goes through.
 */
import { ErrorCode } from '../../shared/protocol/errors';
import { ShimProcess } from '../shim/shim-process';
import { eventually, FaultStack, killGroup, note } from './stack';

jest.setTimeout(60_000);

const TIMEOUT_MS = 4000;

describe('fault: the shim facing a dead gateway', () => {
  let stack: FaultStack;
  let shim: ShimProcess;
  let shell: number | undefined;

  beforeAll(async () => {
    stack = await FaultStack.start({ gateway: false });
    shim = await ShimProcess.start(stack.url, {
      args: ['--timeout-ms', String(TIMEOUT_MS), '--connect-timeout-ms', '1000'],
      env: { TOOLGATE_TOKEN: stack.token('shim-fault') },
    });
  });
  afterAll(async () => {
    if (stack?.gateway) process.kill(stack.gateway.pid, 'SIGCONT');
    if (shell) killGroup(shell);
    await shim?.close();
    await stack?.close();
  });

  /** Sends a request and times its reply. */
  async function ask(id: string, method: string, params?: unknown) {
    const t0 = performance.now();
    await shim.send({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
    const reply = await shim.reply(id, 20_000);
    return { reply, ms: performance.now() - t0 };
  }
  const echo = (id: string, text: string) => ask(id, 'tools/call', { name: 'run_command', arguments: { command: `echo ${text}` } });

  it('no gateway listening: -32006 "unreachable" at once for pings and calls', async () => {
    // The first reply also waits for the shim's own start-up; the call after it is timed alone.
    const ping = await ask('down-1', 'ping');
    expect(ping.reply.error).toMatchObject({ code: ErrorCode.Unavailable, message: expect.stringMatching(/gateway unreachable at .*ECONNREFUSED/) });
    const call = await echo('down-2', 'nobody');
    expect(call.reply.error).toMatchObject({ code: ErrorCode.Unavailable, message: expect.stringMatching(/gateway unreachable at .*ECONNREFUSED/) });
    // Refused at once, not after a connect timeout or the request deadline (a loose bound: a busy machine).
    expect(call.ms).toBeLessThan(5000);
    note(
      'shim, no gateway',
      `tools/call → -32006 "${call.reply.error!.message}" in ${Math.round(call.ms)} ms (ping likewise, ${Math.round(ping.ms)} ms with the shim's start-up)`,
    );
  });

  it('the gateway comes up: the next request goes through', async () => {
    await stack.startGateway();
    const call = await echo('up-1', 'hello');
    expect(call.reply.result).toMatchObject({ structuredContent: { stdout: 'hello\n', exitCode: 0 } });
  });

  it('the gateway killed mid-call: an error reply, not a hang; the shim serves on when it is back', async () => {
    await shim.send({
      jsonrpc: '2.0',
      id: 'mid',
      method: 'tools/call',
      params: { name: 'run_command', arguments: { command: 'echo $$ >> runs.log; sleep 20' } },
    });
    await eventually(() => stack.linesOf('shim-fault', 'runs.log').length > 0, 'the command to start');
    shell = Number(stack.linesOf('shim-fault', 'runs.log')[0]);
    const killedAt = performance.now();
    await stack.kill(stack.gateway!, 'SIGKILL');
    const reply = await shim.reply('mid', 20_000);
    const afterKillMs = performance.now() - killedAt;
    // The call had started on the gateway: its outcome is unknown to the shim, never "did not run".
    expect(reply.error).toMatchObject({
      code: ErrorCode.OutcomeUnknown,
      message: expect.stringMatching(/^Outcome unknown: the connection to .* closed before its reply/),
    });
    expect(afterKillMs).toBeLessThan(5000);

    const still = await echo('dead-again', 'nobody');
    expect(still.reply.error).toMatchObject({ code: ErrorCode.Unavailable, message: expect.stringMatching(/ECONNREFUSED/) });

    await stack.startGateway();
    const back = await echo('back', 'back');
    expect(back.reply.result).toMatchObject({ structuredContent: { stdout: 'back\n' } });
    // The killed call was not re-sent by anyone: its command started once.
    expect(stack.linesOf('shim-fault', 'runs.log')).toHaveLength(1);
    note(
      'shim, gateway SIGKILLed mid-call',
      `-32010 "${reply.error!.message}" ${Math.round(afterKillMs)} ms after the kill; next request after the restart ok; command started once`,
    );
  });

  it('the gateway frozen (accepts, never answers): -32005 at the shim deadline, then it works again', async () => {
    const gateway = stack.gateway!;
    process.kill(gateway.pid, 'SIGSTOP');
    try {
      const hung = await echo('frozen', 'never');
      expect(hung.reply.error).toMatchObject({ code: ErrorCode.Timeout });
      expect(hung.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 100);
      expect(hung.ms).toBeLessThan(TIMEOUT_MS + 5000);
      note('shim, gateway frozen (SIGSTOP)', `-32005 "${hung.reply.error!.message}" after ${Math.round(hung.ms)} ms (--timeout-ms ${TIMEOUT_MS})`);
    } finally {
      process.kill(gateway.pid, 'SIGCONT');
    }
    const thawed = await echo('thawed', 'thawed');
    expect(thawed.reply.result).toMatchObject({ structuredContent: { stdout: 'thawed\n' } });
    expect(shim.child.exitCode).toBeNull();
  });
});
