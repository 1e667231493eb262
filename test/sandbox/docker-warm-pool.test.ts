/**
 * The docker backend's warm pool (TOOLGATE_SANDBOX_POOL_SIZE): sandboxes started before their
 * tenant is known, bound to a tenant's workspace on its first call. A pooled sandbox is hardened
 * exactly like a fresh one, serves one tenant only, sees that tenant's workspace and nothing of
 * another's; the pool refills, and stopping the backend (or a restarted executor's clean-up)
 * leaves no container and no mount behind.
 */
import { execFileSync } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Sandbox, SandboxBackend } from '../../executor/sandbox/backend';
import { dockerBackend } from '../../executor/sandbox/docker/backend';
import { cleanupStaleSandboxes, poolDirFor } from '../../executor/sandbox/docker/stale';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { describeIf, isRoot } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, SANDBOX_IMAGE, sandboxContainers } from '../helpers/docker';

const never = () => new AbortController().signal;
const why = dockerUnavailable ?? (isRoot ? undefined : 'the warm pool mounts workspaces: run as root');

async function eventually(check: () => boolean | Promise<boolean>, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Inspect {
  Id: string;
  Name: string;
  Config: { User: string; Env: string[]; Cmd: string[]; Entrypoint: string[]; WorkingDir: string; Labels: Record<string, string> };
  HostConfig: Record<string, unknown> & { Binds: string[] };
}

function inspect(id: string): Inspect {
  return (JSON.parse(execFileSync('docker', ['inspect', id], { encoding: 'utf8' })) as Inspect[])[0]!;
}

/** This executor's containers: id → name. */
function containers(executorId: string): Map<string, string> {
  const out = execFileSync('docker', ['ps', '-a', '--no-trunc', '--filter', `label=toolgate.executor=${executorId}`, '--format', '{{.ID}} {{.Names}}'], {
    encoding: 'utf8',
  });
  return new Map(
    out
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(' ') as [string, string]),
  );
}

const unbound = (executorId: string) => [...containers(executorId).values()].filter((n) => n.startsWith('toolgate_pool-')).length;
const mountsUnder = (dir: string) =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => l.split(' ')[4]?.startsWith(dir));

async function out(sandbox: Sandbox, command: string): Promise<string> {
  const r = await sandbox.call('run_command', { command }, never());
  return (r.structuredContent as { stdout: string }).stdout;
}

describeIf(why === undefined, why ?? '', 'docker backend: the warm pool', () => {
  const executorId = `warm-pool-test-${process.pid}`;
  let dataDir: string;
  let backend: SandboxBackend;

  async function workspace(name: string, file: string): Promise<string> {
    const dir = path.join(dataDir, 'workspaces', name);
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    await fs.writeFile(path.join(dir, 'who'), file);
    return dir;
  }

  beforeAll(async () => {
    await ensureSandboxImage();
    dataDir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-warm-pool-')));
    backend = dockerBackend({
      image: SANDBOX_IMAGE,
      executorId,
      dataDir,
      hostDataDir: dataDir,
      chownWorkspace: true,
      poolSize: 2,
      onPoolError: (err) => console.error('pool:', err),
    });
    await backend.warm!(DEFAULT_LIMITS);
  }, 180_000);

  afterAll(async () => {
    await backend?.close?.();
    await cleanupStaleSandboxes(executorId, { dataDir });
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('binds a pre-started sandbox to the tenant, hardened exactly like a fresh one', async () => {
    expect(unbound(executorId)).toBe(2);
    const ws = await workspace('pool-a', 'a');
    const pooled = await backend.start({ workspace: ws, limits: DEFAULT_LIMITS, tenant: 'pool-a' });
    // The same spec, without a pool: the reference.
    const freshWs = await workspace('fresh', 'f');
    const fresh = await dockerBackend({ image: SANDBOX_IMAGE, executorId, chownWorkspace: true }).start({
      workspace: freshWs,
      limits: DEFAULT_LIMITS,
      tenant: 'fresh',
    });
    try {
      expect(await out(pooled, 'cat who; pwd; id -u; touch made')).toBe('a/workspace\n65534\n');
      expect((await fs.stat(path.join(ws, 'made'))).uid).toBe(65534);
      const [p] = sandboxContainers('pool-a', true);
      const [f] = sandboxContainers('fresh', true);
      const a = inspect(p!);
      const b = inspect(f!);
      // Named for its tenant once bound; labelled as pooled (labels are fixed at create).
      expect(a.Name).toMatch(/^\/toolgate-pool-a-[0-9a-f]{8}$/);
      expect(a.Config.Labels).toMatchObject({ 'toolgate.sandbox': '1', 'toolgate.executor': executorId, 'toolgate.pool': '1', 'toolgate.tenant': '' });
      const { Binds: pooledBinds, ...pooledHost } = a.HostConfig;
      const { Binds: freshBinds, ...freshHost } = b.HostConfig;
      expect(pooledHost).toEqual(freshHost);
      expect(freshBinds).toEqual([`${freshWs}:/workspace:rw`]);
      expect(pooledBinds).toHaveLength(1);
      expect(pooledBinds[0]).toMatch(new RegExp(`^${poolDirFor(dataDir)}/toolgate_pool-[0-9a-f]{12}:/workspace:rw,rslave$`));
      const { Cmd: pooledCmd, Labels: _pl, ...pooledConfig } = a.Config;
      const { Cmd: freshCmd, Labels: _fl, ...freshConfig } = b.Config;
      expect(pooledConfig).toEqual(freshConfig);
      expect(pooledCmd).toEqual([...freshCmd, '--await-bind']);
    } finally {
      await pooled.stop();
      await fresh.stop();
    }
    expect(sandboxContainers('pool-a')).toEqual([]);
  }, 120_000);

  it('never lets two tenants share a sandbox, and refills', async () => {
    await backend.warm!(DEFAULT_LIMITS);
    const a = await backend.start({ workspace: await workspace('pool-b', 'b'), limits: DEFAULT_LIMITS, tenant: 'pool-b' });
    const b = await backend.start({ workspace: await workspace('pool-c', 'c'), limits: DEFAULT_LIMITS, tenant: 'pool-c' });
    const [idA] = sandboxContainers('pool-b', true);
    const [idB] = sandboxContainers('pool-c', true);
    try {
      expect(idA).toBeDefined();
      expect(idB).toBeDefined();
      expect(idA).not.toBe(idB);
      expect(await out(a, 'cat who; echo; ls /workspace')).toBe('b\nwho\n');
      expect(await out(b, 'cat who; echo; ls')).toBe('c\nwho\n');
      // Each sees its own workspace only: the other's file is not there, by any path.
      await out(a, 'echo secret > mine');
      expect(await out(b, 'cat mine 2>&1; ls -a /workspace')).toMatch(/No such file[\s\S]*\.\n\.\.\nwho\n$/);
      // Both taken: the pool fills up again in the background.
      await eventually(() => unbound(executorId) === 2, 'the pool to refill').catch((err: Error) => {
        throw new Error(`${err.message}: ${JSON.stringify([...containers(executorId)])}`);
      });
    } finally {
      await a.stop();
      await b.stop();
    }
    // A stopped pooled sandbox is removed, never handed out again.
    expect(containers(executorId).has(idA!)).toBe(false);
    expect(containers(executorId).has(idB!)).toBe(false);
    expect(mountsUnder(poolDirFor(dataDir)).length).toBe(1); // the pool directory's own mount; no slot holds a workspace
  }, 180_000);

  it('leaves nothing when stopped, and a restarted executor cleans up what a crashed one left', async () => {
    await backend.warm!(DEFAULT_LIMITS);
    // A bound sandbox whose executor "crashes": its slot keeps the workspace mounted.
    const held = await backend.start({ workspace: await workspace('pool-d', 'd'), limits: DEFAULT_LIMITS, tenant: 'pool-d' });
    expect(held.alive).toBe(true);
    await backend.warm!(DEFAULT_LIMITS); // the refill after that bind, done: two wait again
    expect(mountsUnder(poolDirFor(dataDir)).length).toBeGreaterThan(1);
    const removed = await cleanupStaleSandboxes(executorId, { dataDir });
    expect(removed).toBeGreaterThanOrEqual(3); // the bound one and the two waiting
    await held.exited;
    await backend.close!();
    expect(containers(executorId).size).toBe(0);
    expect(mountsUnder(poolDirFor(dataDir))).toEqual([]);
    expect(await fs.readdir(poolDirFor(dataDir))).toEqual([]);
  }, 120_000);

  it('turns itself off when the bound workspace is not what the agent sees, and starts the tenant fresh', async () => {
    // The Docker host resolves this backend's paths under `host`, a shared mount of its own, while
    // the executor mounts under `seen`: the slot the container binds never gets the workspace.
    const seen = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-warm-pool-seen-')));
    const host = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-warm-pool-host-')));
    execFileSync('mount', ['--bind', host, host]);
    execFileSync('mount', ['--make-shared', host]);
    const errors: string[] = [];
    const id = `${executorId}-off`;
    const off = dockerBackend({
      image: SANDBOX_IMAGE,
      executorId: id,
      dataDir: seen,
      hostDataDir: host,
      chownWorkspace: true,
      poolSize: 1,
      onPoolError: (err) => errors.push(String(err)),
    });
    try {
      await off.warm!(DEFAULT_LIMITS);
      const ws = path.join(seen, 'workspaces', 'pool-off');
      await fs.mkdir(ws, { recursive: true });
      const sandbox = await off.start({ workspace: ws, limits: DEFAULT_LIMITS, tenant: 'pool-off' });
      expect(sandbox.alive).toBe(true);
      await sandbox.stop();
      expect(errors.join('\n')).toMatch(/is not the one it sees/);
      // Off: no pre-started sandbox is left, none is started again.
      await off.warm!(DEFAULT_LIMITS);
      expect([...containers(id).values()].filter((n) => n.startsWith('toolgate_pool-'))).toEqual([]);
    } finally {
      await off.close!();
      await cleanupStaleSandboxes(id, { dataDir: seen });
      execFileSync('umount', ['-l', host]);
      await fs.rm(seen, { recursive: true, force: true });
      await fs.rm(host, { recursive: true, force: true });
    }
  }, 120_000);
});
