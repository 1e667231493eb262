/**
 * What the bwrap wall proves from inside: no network (not even the host's loopback), nothing
 * writable but the workspace and a private /tmp, no server environment, no capabilities, an
 * unprivileged uid, and hostile commands (fork bomb, endless output) contained while the agent
 * keeps serving.
 */
import { existsSync, promises as fs } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { bwrapBackend } from '../../executor/sandbox/bwrap';
import type { Sandbox } from '../../executor/sandbox/backend';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';

const never = () => new AbortController().signal;

describeIf(hasCommand('bwrap') && isRoot, 'needs bubblewrap (apt-get install bubblewrap) and root', 'bwrap isolation', () => {
  let workspace: string;
  let sandbox: Sandbox;
  const run = async (command: string, timeout_ms = 10_000) => {
    const r = await sandbox.call('run_command', { command, timeout_ms }, never());
    return r.structuredContent as { exitCode?: number; stdout: string; stderr: string; timedOut: boolean; stoppedForOutput?: boolean; truncated: boolean };
  };

  beforeAll(async () => {
    process.env.TOOLGATE_JWT_SECRET = 'server-secret-never-in-sandbox';
    workspace = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-bwrap-'));
    await fs.chown(workspace, 65534, 65534);
    sandbox = await bwrapBackend().start({ workspace, limits: { ...DEFAULT_LIMITS, maxOutputBytes: 64 * 1024 }, tenant: 'iso' });
  });
  afterAll(async () => {
    delete process.env.TOOLGATE_JWT_SECRET;
    await sandbox?.stop();
    await fs.rm(workspace, { recursive: true, force: true });
  });

  it('cannot reach the host network, not even loopback', async () => {
    let connections = 0;
    const server = net.createServer((s) => {
      connections++;
      s.destroy();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const r = await run(
        `node -e "require('net').connect(${port},'127.0.0.1').on('connect',()=>console.log('CONNECTED')).on('error',e=>console.log('ERR',e.code))"`,
      );
      expect(r.stdout).toMatch(/ERR/);
      expect(r.stdout).not.toMatch(/CONNECTED/);
      const ifaces = await run('cat /proc/net/dev');
      expect(ifaces.stdout).not.toMatch(/eth|ens|docker|veth/);
    } finally {
      server.close();
    }
    expect(connections).toBe(0);
  });

  it('can write only its workspace and a private /tmp', async () => {
    const marker = `tg-private-${process.pid}-${Date.now()}`;
    const r = await run(
      // The system paths are read-only; the project's own path is checked on the host below (when the
      // checkout lies under /tmp, the sandbox's private /tmp may take that write harmlessly).
      `for p in /usr/x /etc/x /x /opt/x /proc/x; do touch "$p" 2>/dev/null && echo "WROTE $p"; done; touch ${path.resolve(__dirname, '../..')}/x 2>/dev/null; ` +
        `echo ok > /tmp/${marker} && echo tmp-ok; echo ws > inside.txt && echo ws-ok`,
    );
    expect(r.stdout).not.toMatch(/WROTE/);
    expect(r.stdout).toMatch(/tmp-ok/);
    expect(r.stdout).toMatch(/ws-ok/);
    expect(existsSync(path.join('/tmp', marker))).toBe(false);
    expect(existsSync(path.resolve(__dirname, '../..', 'x'))).toBe(false);
    expect(await fs.readFile(path.join(workspace, 'inside.txt'), 'utf8')).toBe('ws\n');
  });

  it('sees no server environment, runs unprivileged with no capabilities', async () => {
    const r = await run('env; cat /proc/$PPID/environ | tr "\\0" "\\n"; id -u; grep -E "CapEff|NoNewPrivs" /proc/self/status');
    expect(r.stdout).not.toContain('server-secret-never-in-sandbox');
    expect(r.stdout).toMatch(/^65534$/m);
    expect(r.stdout).toMatch(/CapEff:\s+0000000000000000/);
  });

  it('sees only its own processes', async () => {
    const r = await run('ls /proc | grep -c "^[0-9]"');
    expect(Number(r.stdout.trim())).toBeLessThan(15);
  });

  it('contains a fork bomb and keeps serving', async () => {
    const r = await run('bomb() { bomb | bomb & }; bomb; sleep 2', 3000);
    expect(r).toBeDefined();
    const after = await run('echo alive');
    expect(after.stdout).toBe('alive\n');
  }, 30_000);

  it('caps endless output and keeps serving', async () => {
    const r = await run('yes', 1500);
    // Stopped by the output cap (TOOLGATE_MAX_COMMAND_OUTPUT_BYTES) or, on a slow machine, the timeout.
    expect(r.stoppedForOutput === true || r.timedOut).toBe(true);
    expect(r.truncated).toBe(true);
    expect(r.stdout.length).toBeLessThanOrEqual(64 * 1024 + 64); // head, tail and the line between
    expect((await run('echo still-here')).stdout).toBe('still-here\n');
  }, 30_000);
});
