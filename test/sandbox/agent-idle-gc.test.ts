/**
 * The sandbox agent gives its heap back when the executor stops calling: one forced, compacting
 * major GC after IDLE_GC_MS without a frame, then none until frames come again (a busy agent never
 * pays for it). Observed in a real agent started with the backends' flags, through a preload that
 * reports each call of V8's gc on stderr.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { AGENT_MAIN, AgentProcess } from '../../executor/sandbox/agent-process';
import type { AgentConnection } from '../../executor/sandbox/agent-connection';
import { IDLE_GC_MS } from '../../executor/agent/idle-gc';
import { AGENT_NODE_FLAGS } from '../../executor/sandbox/none';
import { DEFAULT_LIMITS } from '../../shared/limits';

const never = () => new AbortController().signal;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('sandbox agent: one GC when idle', () => {
  let root: string;
  let agent: AgentConnection;
  let forced = 0;

  async function until(condition: () => boolean, what: string): Promise<void> {
    for (const t0 = Date.now(); !condition(); await sleep(20)) {
      if (Date.now() - t0 > 20_000) throw new Error(`timed out waiting for ${what}`);
    }
  }

  beforeAll(async () => {
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-agent-idle-gc-')));
    await fs.writeFile(path.join(root, 'a.txt'), 'hello');
    agent = await AgentProcess.start(
      {
        file: process.execPath,
        args: [...AGENT_NODE_FLAGS, '-r', path.join(__dirname, 'fixtures/gc-log.js'), AGENT_MAIN, '--root', root, '--limits', JSON.stringify(DEFAULT_LIMITS)],
        env: { PATH: '/usr/bin:/bin' },
      },
      { workspace: root, limits: DEFAULT_LIMITS, tenant: 'idle-gc' },
      { startTimeoutMs: 20_000, onStderr: (line) => void (line.includes('forced major gc') && forced++) },
    );
  });

  afterAll(async () => {
    await agent?.stop();
    await fs.rm(root, { recursive: true, force: true });
  });

  it('collects once after the calls stop, and again only after new calls', async () => {
    const read = async () => expect((await agent.call('read_file', { path: 'a.txt' }, never())).isError).toBeFalsy();
    for (let i = 0; i < 20; i++) await read();
    await until(() => forced === 1, 'the first idle GC');
    // Idle with no frames: it does not collect again however long it waits.
    await sleep(4 * IDLE_GC_MS);
    expect(forced).toBe(1);
    await read();
    await until(() => forced === 2, 'the idle GC after a new call');
    await sleep(4 * IDLE_GC_MS);
    expect(forced).toBe(2);
  });
});
