import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Sandbox } from '../../executor/sandbox/backend';
import { inProcessBackend } from '../../executor/sandbox/in-process';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { RequestCancel } from '../../shared/protocol/dispatcher';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import { sandboxBackendContract } from './sandbox-backend.suite';

// `none` as stdio and the embedded executor run it: the sandbox tools in this process (in-process.ts).
sandboxBackendContract('none in-process', { backend: () => inProcessBackend(), inProcess: true });

// stdio's MCP server hands on a signal made on first read (a request context): the contract's
// cancel and stop cases again with one, where the call settles once its tool has ended.
describe('none in-process: a caller whose signal is made on first read', () => {
  let workspace: string;
  let sandbox: Sandbox;
  beforeEach(async () => {
    workspace = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-in-process-lazy-'));
    sandbox = await inProcessBackend().start({ workspace, limits: DEFAULT_LIMITS, tenant: 'lazy' });
  });
  afterEach(async () => {
    await sandbox.stop();
    await fs.rm(workspace, { recursive: true, force: true });
  });

  it('cancels a running call and kills its command', async () => {
    const cancel = new RequestCancel();
    const started = Date.now();
    const call = sandbox.call('run_command', { command: 'sleep 1; touch late-marker' }, cancel);
    setTimeout(() => cancel.abort(new ProtocolError(ErrorCode.Cancelled, 'test cancelled')), 200);
    await expect(call).rejects.toMatchObject({ code: ErrorCode.Cancelled });
    expect(Date.now() - started).toBeLessThan(900);
    await new Promise((r) => setTimeout(r, 1500));
    await expect(fs.stat(path.join(workspace, 'late-marker'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('stop() during a call fails it as outcome unknown (it ran in part) and ends its command', async () => {
    const started = Date.now();
    const call = sandbox.call('run_command', { command: 'sleep 2; touch stop-marker' }, new RequestCancel());
    await new Promise((r) => setTimeout(r, 300));
    await sandbox.stop();
    await expect(call).rejects.toMatchObject({ code: ErrorCode.OutcomeUnknown });
    expect(Date.now() - started).toBeLessThan(2000);
    await new Promise((r) => setTimeout(r, 2500));
    await expect(fs.stat(path.join(workspace, 'stop-marker'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('runs a call whose signal nobody reads without making one', async () => {
    await fs.writeFile(path.join(workspace, 'a.txt'), 'alpha');
    const cancel = new RequestCancel();
    const signal = jest.spyOn(cancel, 'signal', 'get');
    const r = await sandbox.call('read_file', { path: 'a.txt' }, cancel);
    expect(r.structuredContent?.content).toBe('alpha');
    expect(signal).not.toHaveBeenCalled();
  });
});
