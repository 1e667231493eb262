/**
 * What the docker wall proves from inside a tenant's sandbox: only its own loopback (and nothing
 * listening on it), no way to the host's loopback services (Redis, the gateway: tripwire
 * listeners stand in for them), nothing writable but /workspace and a size-limited /tmp, no
 * capabilities, no-new-privileges, an unprivileged uid, no server environment, a process limit
 * a fork bomb hits, a memory limit whose killer the sandbox survives (the command killed, or the
 * agent killed and its sandbox started anew), and two tenants that cannot see each other's
 * files or processes.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, promises as fs, readFileSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Sandbox, SandboxBackend } from '../../executor/sandbox/backend';
import { dockerBackend } from '../../executor/sandbox/docker/backend';
import { SingleSandbox } from '../../executor/sandbox/single';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { ErrorCode } from '../../shared/protocol/errors';
import { describeIf } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, SANDBOX_IMAGE, sandboxContainers } from '../helpers/docker';

const never = () => new AbortController().signal;
const SECRET = `server-secret-never-in-sandbox-${process.pid}`;
const MEMORY_MB = 128;
const PIDS = 64;
const TMP_MB = 16;

interface RunResult {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

async function run(sandbox: Sandbox, command: string, timeout_ms = 15_000): Promise<RunResult> {
  const r = await sandbox.call('run_command', { command, timeout_ms }, never());
  if (r.isError) throw new Error(`run_command failed: ${JSON.stringify(r.content)}`);
  return r.structuredContent as unknown as RunResult;
}

async function workspace(): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-docker-iso-'));
  await fs.chown(dir, 65534, 65534);
  return dir;
}

/** A listener on the host's loopback that counts every connection: it must stay at zero. */
async function tripwire(): Promise<{ port: number; connections: () => number; close: () => Promise<void> }> {
  let connections = 0;
  const server = net.createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => connections,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** A node one-liner run inside: tries a TCP connection to 127.0.0.1:port and prints the outcome. */
const connectProbe = (port: number) =>
  `node -e "const s=require('net').connect(${port},'127.0.0.1');s.setTimeout(2000);s.on('connect',()=>{console.log('CONNECTED ${port}');s.destroy()}).on('error',e=>console.log('ERR ${port}',e.code)).on('timeout',()=>{console.log('TIMEOUT ${port}');s.destroy()})"`;

describeIf(!dockerUnavailable, dockerUnavailable ?? '', 'docker isolation', () => {
  let backend: SandboxBackend;
  const dirs: string[] = [];
  const sandboxes: Sandbox[] = [];
  const start = async (tenant: string, dir?: string) => {
    const ws = dir ?? (await workspace());
    if (!dir) dirs.push(ws);
    const s = await backend.start({ workspace: ws, limits: { ...DEFAULT_LIMITS, maxOutputBytes: 64 * 1024 }, tenant });
    sandboxes.push(s);
    return { sandbox: s, workspace: ws };
  };

  beforeAll(async () => {
    await ensureSandboxImage();
    process.env.TOOLGATE_JWT_SECRET = SECRET;
    backend = dockerBackend({ image: SANDBOX_IMAGE, memoryMb: MEMORY_MB, pidsLimit: PIDS, tmpMb: TMP_MB, executorId: `iso-test-${process.pid}` });
  }, 180_000);
  afterAll(async () => {
    delete process.env.TOOLGATE_JWT_SECRET;
    await Promise.all(sandboxes.map((s) => s.stop()));
    await Promise.all(dirs.map((d) => fs.rm(d, { recursive: true, force: true })));
    for (const tenant of ['iso', 'iso-mem', 'iso-a', 'iso-b']) expect(sandboxContainers(tenant)).toEqual([]);
  });

  describe('one sandbox', () => {
    let sandbox: Sandbox;
    let ws: string;
    beforeAll(async () => {
      ({ sandbox, workspace: ws } = await start('iso'));
    });

    it('has only a loopback interface, and nothing listens on it', async () => {
      const r = await run(
        sandbox,
        'ls /sys/class/net; echo ---; tail -n +3 /proc/net/dev; echo ---; cat /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6',
      );
      const [ifaces, dev, sockets] = r.stdout.split('---\n');
      expect(ifaces!.trim().split('\n')).toEqual(['lo']);
      expect(
        dev!
          .trim()
          .split('\n')
          .map((l) => l.split(':')[0]!.trim()),
      ).toEqual(['lo']);
      // Socket tables: headers only, no listening (or any) socket.
      expect(
        sockets!
          .trim()
          .split('\n')
          .filter((l) => !/^\s*sl\s/.test(l)),
      ).toEqual([]);
      const local = await run(sandbox, `${connectProbe(6379)}; ${connectProbe(3000)}; ${connectProbe(80)}`);
      expect(local.stdout).toMatch(/ERR 6379 ECONNREFUSED/);
      expect(local.stdout).toMatch(/ERR 3000 ECONNREFUSED/);
      expect(local.stdout).not.toMatch(/CONNECTED/);
    });

    it('cannot reach services on the host loopback (Redis, the gateway)', async () => {
      const redis = await tripwire();
      const gateway = await tripwire();
      try {
        const r = await run(sandbox, `${connectProbe(redis.port)}; ${connectProbe(gateway.port)}`);
        expect(r.stdout).toMatch(new RegExp(`ERR ${redis.port} `));
        expect(r.stdout).toMatch(new RegExp(`ERR ${gateway.port} `));
        expect(r.stdout).not.toMatch(/CONNECTED/);
      } finally {
        await redis.close();
        await gateway.close();
      }
      expect(redis.connections()).toBe(0);
      expect(gateway.connections()).toBe(0);
    });

    it('can write only its workspace and a private, size-limited /tmp', async () => {
      const marker = `tg-private-${process.pid}-${Date.now()}`;
      const outside = [
        '/x',
        '/etc/x',
        '/usr/x',
        '/usr/local/bin/x',
        '/app/x',
        '/app/dist/x',
        '/var/tmp/x',
        '/root/x',
        '/home/x',
        '/run/x',
        '/dev/x',
        '/dev/shm/x',
        '/dev/mqueue/x',
        '/proc/x',
        '/sys/x',
        '/sys/fs/cgroup/x',
      ];
      const r = await run(
        sandbox,
        `for p in ${outside.join(' ')}; do (echo x > "$p") 2>/dev/null && echo "WROTE $p"; mkdir "$p.d" 2>/dev/null && echo "MADE $p.d"; done; ` +
          `echo ok > /tmp/${marker} && echo tmp-ok; echo ws > inside.txt && echo ws-ok; ` +
          `head -c ${(TMP_MB + 4) * 1024 * 1024} /dev/zero > /tmp/fill 2>&1 || echo tmp-full; rm -f /tmp/fill`,
      );
      expect(r.stdout).not.toMatch(/WROTE|MADE/);
      expect(r.stdout).toMatch(/tmp-ok/);
      expect(r.stdout).toMatch(/ws-ok/);
      expect(r.stdout).toMatch(/tmp-full/);
      expect(existsSync(path.join('/tmp', marker))).toBe(false);
      expect(await fs.readFile(path.join(ws, 'inside.txt'), 'utf8')).toBe('ws\n');
      // Read-write mounts, as the kernel lists them: the workspace and /tmp, plus the kernel's and
      // Docker's own (/proc, /dev, /sys/fs/cgroup), root-owned, where the tries above failed.
      const mounts = await run(sandbox, 'cat /proc/mounts');
      const rw = mounts.stdout
        .split('\n')
        .map((l) => l.split(' '))
        .filter((f) => f.length > 3 && f[3]!.split(',').includes('rw'))
        .map((f) => f[1]!);
      expect(rw).toEqual(expect.arrayContaining(['/workspace', '/tmp']));
      expect(rw.filter((m) => !['/workspace', '/tmp', '/dev', '/dev/pts', '/dev/mqueue', '/sys/fs/cgroup'].includes(m) && !m.startsWith('/proc'))).toEqual([]);
      expect(rw).not.toContain('/');
    });

    it('runs as an unprivileged uid with no capabilities and no-new-privileges', async () => {
      const r = await run(sandbox, 'id -u; id -g; grep -E "^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):" /proc/self/status');
      expect(r.stdout).toMatch(/^65534\n65534\n/);
      for (const cap of ['CapInh', 'CapPrm', 'CapEff', 'CapAmb']) expect(r.stdout).toMatch(new RegExp(`${cap}:\\s+0000000000000000`));
      // The bounding set keeps SETUID/SETGID (bits 6, 7), which the agent used once to drop to its
      // uid; with no-new-privileges no exec can gain them, and nothing else reads the bounding set.
      expect(r.stdout).toMatch(/CapBnd:\s+00000000000000c0/);
      expect(r.stdout).toMatch(/NoNewPrivs:\s+1/);
      expect(r.stdout).toMatch(/Seccomp:\s+2/); // Docker's default seccomp profile is in force
    });

    it("sees none of the server's environment", async () => {
      const r = await run(sandbox, 'env; for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f"; done 2>/dev/null');
      expect(r.stdout).not.toContain(SECRET);
      expect(r.stdout).not.toMatch(/TOOLGATE_|JWT/);
      expect(r.stdout).toMatch(/^HOME=\/workspace$/m);
    });

    it('stops a fork bomb at the pids limit and keeps serving', async () => {
      // Whether the bomb burns out (its forks refused) or outlives its 3 s (its process group
      // killed), the sandbox then serves again (forks may fail until the bomb is gone), and its
      // cgroup shows the configured limit and the forks it refused.
      await run(sandbox, 'bomb() { bomb | bomb & }; bomb; sleep 30', 3000);
      let after: RunResult | undefined;
      for (let i = 0; i < 40 && !after?.stdout.startsWith('alive'); i++) {
        after = await run(
          sandbox,
          'echo alive; cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids/pids.events 2>/dev/null || cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids.events',
        ).catch(() => undefined);
        if (!after?.stdout.startsWith('alive')) await new Promise((res) => setTimeout(res, 250));
      }
      expect(after?.stdout).toMatch(new RegExp(`^alive\\n${PIDS}\\n`));
      expect(Number(/max (\d+)/.exec(after?.stdout ?? '')?.[1] ?? 0)).toBeGreaterThan(0);
      expect(sandbox.alive).toBe(true);
    }, 60_000);
  });

  describe('memory limit', () => {
    const hog = `node -e "const a=[];for(;;)a.push(Buffer.alloc(8<<20,1))"`;

    it('kills a memory hog; the sandbox keeps serving', async () => {
      const { sandbox } = await start('iso-mem');
      const r = await run(
        sandbox,
        `${hog}; echo "status $?"; cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max`,
        30_000,
      );
      expect(r.stdout).toMatch(/status 137/); // SIGKILL, from the OOM killer
      expect(r.stdout).toContain(`\n${MEMORY_MB * 1024 * 1024}\n`); // at the configured limit, swap included
      expect(sandbox.alive).toBe(true);
      expect((await run(sandbox, 'echo alive')).stdout).toBe('alive\n');
    }, 60_000);

    it('when the agent itself is killed, the call fails OutcomeUnknown and a fresh sandbox takes over', async () => {
      const ws = await workspace();
      dirs.push(ws);
      const single = new SingleSandbox(backend, { workspace: ws, limits: DEFAULT_LIMITS, tenant: 'iso-oom' });
      try {
        const first = await single.get();
        // Make the agent the OOM killer's first choice. From the host: its commands cannot touch
        // the agent's /proc files any more (it is non-dumpable), which agent-channel.test.ts proves.
        // The score is raised once the command runs (a child started after would inherit it): the
        // command says it is ready, the score goes up, then it starts the hog.
        const call = first.call('run_command', { command: `touch ready; while [ ! -e go ]; do sleep 0.05; done; ${hog}`, timeout_ms: 30_000 }, never());
        call.catch(() => undefined); // awaited below; a failed step before that must not leave it unhandled
        while (!existsSync(path.join(ws, 'ready'))) await new Promise((r) => setTimeout(r, 50));
        const [id] = sandboxContainers('iso-oom');
        const init = Number(execFileSync('docker', ['inspect', '-f', '{{.State.Pid}}', id!], { encoding: 'utf8' }).trim());
        // The container's init has one child, the agent (processes elsewhere come and go, so
        // scanning all of /proc races with their exits).
        const agentPid = readFileSync(`/proc/${init}/task/${init}/children`, 'utf8').trim().split(/\s+/)[0];
        expect(agentPid).toMatch(/^\d+$/);
        await fs.writeFile(`/proc/${agentPid}/oom_score_adj`, '1000');
        await fs.writeFile(path.join(ws, 'go'), '');
        await expect(call).rejects.toMatchObject({ code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(/out-of-memory/) });
        expect(first.alive).toBe(false);
        const second = await single.get();
        expect(second).not.toBe(first);
        expect((await run(second, 'echo recovered')).stdout).toBe('recovered\n');
      } finally {
        await single.stop();
      }
    }, 60_000);
  });

  describe('two tenants', () => {
    it("cannot see each other's files or processes", async () => {
      const a = await start('iso-a');
      const b = await start('iso-b');
      const mark = `tenant-b-only-${process.pid}`;
      await fs.writeFile(path.join(b.workspace, `${mark}.txt`), mark);
      await fs.chown(path.join(b.workspace, `${mark}.txt`), 65534, 65534);
      const started = await b.sandbox.call('start_process', { command: `sleep 4242; echo ${mark}` }, never());
      expect(started.isError).toBeFalsy();
      const inB = await run(b.sandbox, 'ps -eo args');
      expect(inB.stdout).toContain('sleep 4242');

      // The mark is split in A's command, so only a real sighting of B's file or process matches.
      const half = mark.length >> 1;
      const inA = await run(
        a.sandbox,
        `M1=${mark.slice(0, half)}; M2=${mark.slice(half)}; ps -eo args; ls -a /workspace; ls ${b.workspace} 2>&1; ` +
          'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$f"; echo; done 2>/dev/null; cat /proc/mounts; ' +
          'find / -name "$M1$M2*" -not -path "/proc/*" 2>/dev/null; grep -rl "$M1$M2" /workspace /tmp 2>/dev/null; echo done',
      );
      expect(inA.stdout).not.toContain('4242');
      expect(inA.stdout).not.toContain(mark);
      expect(inA.stdout).toMatch(/No such file or directory/);
      expect(inA.stdout).toMatch(/done\n$/);
      // Its own pid namespace: init, the agent, the shell and ps, little else.
      const procs = await run(a.sandbox, 'ls /proc | grep -c "^[0-9]"');
      expect(Number(procs.stdout.trim())).toBeLessThan(10);
    }, 60_000);
  });
});
