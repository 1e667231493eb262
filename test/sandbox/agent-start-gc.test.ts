/**
 * The sandbox agent runs one compacting major GC right after start-up (what loading its modules
 * left in the heap) and none afterwards: not per call, not when it goes idle (a major GC makes the
 * calls after it run cold). Observed in a real agent started with the backends' flags, through a
 * preload that reports each call of V8's gc on stderr.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { AGENT_MAIN, AgentProcess } from '../../executor/sandbox/agent-process';
import type { AgentConnection } from '../../executor/sandbox/agent-connection';
import { AGENT_NODE_FLAGS } from '../../executor/sandbox/none';
import { DEFAULT_LIMITS } from '../../shared/limits';

const never = () => new AbortController().signal;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('sandbox agent: one GC after start-up', () => {
  let root: string;
  let agent: AgentConnection;
  let forced = 0;

  async function until(condition: () => boolean, what: string): Promise<void> {
    for (const t0 = Date.now(); !condition(); await sleep(20)) {
      if (Date.now() - t0 > 20_000) throw new Error(`timed out waiting for ${what}`);
    }
  }

  beforeAll(async () => {
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-agent-start-gc-')));
    await fs.writeFile(path.join(root, 'a.txt'), 'hello');
    agent = await AgentProcess.start(
      {
        file: process.execPath,
        args: [...AGENT_NODE_FLAGS, '-r', path.join(__dirname, 'fixtures/gc-log.js'), AGENT_MAIN, '--root', root, '--limits', JSON.stringify(DEFAULT_LIMITS)],
        env: { PATH: '/usr/bin:/bin' },
      },
      { workspace: root, limits: DEFAULT_LIMITS, tenant: 'start-gc' },
      { startTimeoutMs: 20_000, onStderr: (line) => void (line.includes('forced major gc') && forced++) },
    );
  });

  afterAll(async () => {
    await agent?.stop();
    await fs.rm(root, { recursive: true, force: true });
  });

  it('collects once after start-up, then not after calls nor when idle', async () => {
    await until(() => forced === 1, 'the GC after start-up');
    for (let i = 0; i < 20; i++) expect((await agent.call('read_file', { path: 'a.txt' }, never())).isError).toBeFalsy();
    expect((await agent.call('run_command', { argv: ['true'] }, never())).isError).toBeFalsy();
    // Quiet for a while: still the one collection (the agent never forces another).
    await sleep(2000);
    expect(forced).toBe(1);
  });
});
