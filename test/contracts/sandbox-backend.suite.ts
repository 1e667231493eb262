/**
 * The contract every sandbox backend must pass (none, bwrap, docker): the same behaviour through
 * a real agent, whatever wall surrounds it. Run from one small .test.ts per backend.
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import { DEFAULT_LIMITS } from '../../shared/limits';
import type { Sandbox, SandboxBackend } from '../../executor/sandbox/backend';
import { callParsing } from '../../executor/sandbox/sandbox-tools';

export interface BackendUnderTest {
  backend: () => SandboxBackend;
  /** Prepares a fresh workspace the backend's sandbox user can write. */
  makeWorkspace?: (dir: string) => Promise<void>;
  /**
   * The tools run in the test's own process (`none` in-process): there is no agent process to
   * die, so the crash case does not apply (a command killing its parent would kill the test).
   */
  inProcess?: boolean;
}

const text = (r: { content: Array<{ type: string; text?: string }> }) => r.content.map((c) => c.text ?? '').join('');
const never = () => new AbortController().signal;

export function sandboxBackendContract(name: string, under: BackendUnderTest): void {
  describe(`sandbox backend contract: ${name}`, () => {
    let workspace: string;
    let sandbox: Sandbox;
    // A sandbox runs arguments its caller parsed (the contract): the test parses them as the executor does.
    const callTool = (tool: string, args: unknown, signal: AbortSignal, onProgress?: (line: string) => void) =>
      callParsing(sandbox, tool, args, signal, onProgress);

    beforeEach(async () => {
      workspace = await fs.mkdtemp(path.join(os.tmpdir(), `tg-contract-${name}-`));
      await under.makeWorkspace?.(workspace);
      sandbox = await under.backend().start({ workspace, limits: DEFAULT_LIMITS, tenant: 'contract' });
    });
    afterEach(async () => {
      await sandbox?.stop();
      await fs.rm(workspace, { recursive: true, force: true });
    });

    it('runs file tools against the workspace', async () => {
      const w = await callTool('write_file', { path: 'dir/a.txt', content: 'alpha' }, never());
      expect(w.isError).toBeFalsy();
      expect(await fs.readFile(path.join(workspace, 'dir/a.txt'), 'utf8')).toBe('alpha');
      const r = await callTool('read_file', { path: 'dir/a.txt' }, never());
      expect(text(r)).toBe('alpha');
      const l = await callTool('list_directory', { path: 'dir' }, never());
      expect(l.structuredContent?.entries).toEqual([expect.objectContaining({ name: 'a.txt', type: 'file' })]);
    });

    it('matches every reply to its own call under concurrency', async () => {
      const values = Array.from({ length: 40 }, (_, i) => `value-${i}-${Math.random()}`);
      await Promise.all(values.map((v, i) => callTool('write_file', { path: `c/${i}.txt`, content: v }, never())));
      const reads = await Promise.all(values.map((_, i) => callTool('read_file', { path: `c/${i}.txt` }, never())));
      expect(reads.map(text)).toEqual(values);
    });

    it('refuses paths outside the workspace', async () => {
      const r = await callTool('read_file', { path: '../../../../etc/passwd' }, never());
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/outside the workspace/);
    });

    it('runs commands in the workspace with a scrubbed environment', async () => {
      process.env.TOOLGATE_CONTRACT_SECRET = 'must-not-leak';
      try {
        const r = await callTool('run_command', { command: 'echo hi; pwd >/dev/null; env' }, never());
        expect(r.structuredContent?.exitCode).toBe(0);
        const out = String(r.structuredContent?.stdout);
        expect(out.startsWith('hi\n')).toBe(true);
        expect(out).not.toContain('must-not-leak');
      } finally {
        delete process.env.TOOLGATE_CONTRACT_SECRET;
      }
    });

    it("reports a running command's newest output line, while it runs (progress)", async () => {
      const lines: Array<{ at: number; line: string }> = [];
      const started = Date.now();
      const r = await callTool('run_command', { command: 'echo first; sleep 1; echo second; sleep 1; echo third' }, never(), (line) =>
        lines.push({ at: Date.now(), line }),
      );
      const ended = Date.now();
      expect(r.isError).toBeFalsy();
      expect(lines.map((l) => l.line)).toEqual(expect.arrayContaining(['first', 'second']));
      // 'first' came a good while before the end: reported as it happened, not afterwards.
      expect(ended - lines.find((l) => l.line === 'first')!.at).toBeGreaterThan(1000);
      expect(lines[0]!.at).toBeGreaterThanOrEqual(started);
    });

    it('cancels a running call and kills its command', async () => {
      const controller = new AbortController();
      const call = callTool('run_command', { command: 'sleep 1; touch late-marker' }, controller.signal);
      setTimeout(() => controller.abort(new ProtocolError(ErrorCode.Cancelled, 'test cancelled')), 200);
      await expect(call).rejects.toMatchObject({ code: ErrorCode.Cancelled });
      await new Promise((r) => setTimeout(r, 1500));
      await expect(fs.stat(path.join(workspace, 'late-marker'))).rejects.toMatchObject({ code: 'ENOENT' });
      const after = await callTool('read_file', { path: 'missing.txt' }, never());
      expect(text(after)).toMatch(/No such file/);
    });

    // Not applicable in process: there is no agent to die, and the command's parent is this test
    // process. The case is left out, not skipped, so a CI run reports no skips.
    if (!under.inProcess)
      it('fails a call with a clear error when the agent dies mid-call', async () => {
        // The command's parent is the agent: killing it is the crash we want to survive.
        const started = Date.now();
        const call = callTool('run_command', { command: 'kill -9 $PPID; sleep 5' }, never());
        // It was running: it may have done part of its work, so it is not "safe to retry".
        await expect(call).rejects.toMatchObject({ code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(/sandbox agent.*may have run/i) });
        expect(Date.now() - started).toBeLessThan(4000);
        await sandbox.exited;
        expect(sandbox.alive).toBe(false);
        // Never reached the agent: it did not run.
        await expect(callTool('read_file', { path: 'x' }, never())).rejects.toMatchObject({ code: ErrorCode.Unavailable });
      });

    it('reports when a started process ends: by itself, by kill_process, or with the sandbox', async () => {
      const start = async (argv: string[]) => {
        const r = await callTool('start_process', { argv }, never());
        expect(r.isError).toBeFalsy();
        return String(r.structuredContent?.handle);
      };
      const quick = await start(['sleep', '0.2']);
      await sandbox.processEnded(quick); // resolves: it exited by itself
      const killed = await start(['sleep', '30']);
      let killedEnded = false;
      const ending = sandbox.processEnded(killed).then(() => (killedEnded = true));
      await new Promise((r) => setTimeout(r, 100));
      expect(killedEnded).toBe(false); // still running: not reported
      await callTool('kill_process', { handle: killed }, never());
      await ending;
      const left = await start(['sleep', '30']);
      const leftEnded = sandbox.processEnded(left);
      await sandbox.stop();
      await leftEnded; // the sandbox ended, and the process with it
      await sandbox.processEnded('p999'); // after the end, every handle has ended
    });

    it('stop() during a call fails it as OutcomeUnknown (it ran in part) and ends its command', async () => {
      const started = Date.now();
      const call = callTool('run_command', { command: 'sleep 2; touch stop-marker' }, never());
      await new Promise((r) => setTimeout(r, 300));
      await sandbox.stop();
      await expect(call).rejects.toMatchObject({ code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(/may have run/) });
      expect(Date.now() - started).toBeLessThan(2000);
      await new Promise((r) => setTimeout(r, 2500));
      await expect(fs.stat(path.join(workspace, 'stop-marker'))).rejects.toMatchObject({ code: 'ENOENT' });
    });

    it('stop() ends the agent and later calls fail', async () => {
      await sandbox.stop();
      expect(sandbox.alive).toBe(false);
      await expect(callTool('list_directory', { path: '.' }, never())).rejects.toBeInstanceOf(ProtocolError);
    });

    it('refuses to start on a workspace that does not exist, saying why', async () => {
      await expect(under.backend().start({ workspace: path.join(workspace, 'nope'), limits: DEFAULT_LIMITS, tenant: 'x' })).rejects.toThrow(
        /nope|no such|does not exist|ENOENT/i,
      );
    });
  });
}
