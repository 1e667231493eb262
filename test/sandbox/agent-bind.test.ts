/**
 * A pre-started agent (`--await-bind`, the docker warm pool's) holds no workspace until it is
 * bound: it refuses tools before, enters its root on `sandbox/bind` and answers with the device
 * and inode it sees there, and refuses a second bind (a sandbox serves one workspace only).
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { AGENT_MAIN, AgentProcess } from '../../executor/sandbox/agent-process';
import type { AgentConnection } from '../../executor/sandbox/agent-connection';
import { DEFAULT_LIMITS } from '../../shared/limits';

const never = () => new AbortController().signal;

describe('sandbox agent: --await-bind', () => {
  let root: string;
  let agent: AgentConnection;

  beforeAll(async () => {
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-agent-bind-')));
    await fs.writeFile(path.join(root, 'who'), 'bound');
    agent = await AgentProcess.start(
      {
        file: process.execPath,
        args: [AGENT_MAIN, '--root', root, '--limits', JSON.stringify(DEFAULT_LIMITS), '--await-bind'],
        env: { PATH: '/usr/bin:/bin' },
      },
      // The spawn's cwd is elsewhere: the agent must not be in its root before the bind.
      { workspace: os.tmpdir(), limits: DEFAULT_LIMITS, tenant: 'bind' },
      { startTimeoutMs: 20_000 },
    );
  }, 30_000);
  afterAll(async () => {
    await agent?.stop();
    await fs.rm(root, { recursive: true, force: true });
  });

  it('refuses tools before the bind, serves its root after it, and binds once only', async () => {
    await expect(agent.call('read_file', { path: 'who' }, never())).rejects.toThrow(/no workspace yet/);
    const seen = await agent.bind(root);
    const st = await fs.stat(root);
    expect(seen).toEqual({ dev: st.dev, ino: st.ino });
    const read = await agent.call('read_file', { path: path.join(root, 'who') }, never());
    expect(read.isError).toBeFalsy();
    expect(JSON.stringify(read.content)).toContain('bound');
    const pwd = await agent.call('run_command', { argv: ['pwd'] }, never());
    expect((pwd.structuredContent as { stdout: string }).stdout).toBe(`${root}\n`);
    await expect(agent.bind(root)).rejects.toThrow(/already bound/);
    expect(agent.alive).toBe(true);
  });
});
