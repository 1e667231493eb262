/**
 * The docker backend's own promises, seen from the Docker host: the container it creates carries
 * every hardening setting and the labels an executor finds it by; the settings are its options;
 * a workspace under the data directory is mounted from the host's view of it; an OCI runtime is
 * passed through; a missing image or workspace fails with a sentence saying what to do; and
 * `cleanupStaleSandboxes` removes exactly one executor's leftovers.
 */
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { dockerBackend } from '../../executor/sandbox/docker/backend';
import { cleanupStaleSandboxes } from '../../executor/sandbox/docker/stale';
import { callParsing } from '../../executor/sandbox/sandbox-tools';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { describeIf } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, SANDBOX_IMAGE, sandboxContainers } from '../helpers/docker';

interface Inspected {
  Name: string;
  Config: { User: string; Cmd: string[]; Labels: Record<string, string>; Env: string[]; OpenStdin: boolean; StdinOnce: boolean; Tty: boolean };
  HostConfig: {
    NetworkMode: string;
    ReadonlyRootfs: boolean;
    CapDrop: string[];
    SecurityOpt: string[];
    IpcMode: string;
    PidsLimit: number;
    Memory: number;
    MemorySwap: number;
    NanoCpus: number;
    Tmpfs: Record<string, string>;
    Binds: string[];
    Init: boolean;
    Runtime: string;
    LogConfig: { Type: string };
  };
}

const docker = (...args: string[]) => execFileSync('docker', args, { encoding: 'utf8' });
const inspectTenant = (tenant: string): Inspected => {
  const [id] = sandboxContainers(tenant);
  if (!id) throw new Error(`no container for tenant ${tenant}`);
  return (JSON.parse(docker('inspect', id)) as Inspected[])[0]!;
};

describeIf(!dockerUnavailable, dockerUnavailable ?? '', 'docker backend', () => {
  const executorId = `backend-test-${process.pid}`;
  let base: string;

  beforeAll(async () => {
    await ensureSandboxImage();
    base = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-docker-backend-'));
  }, 180_000);
  afterAll(async () => {
    await cleanupStaleSandboxes(executorId);
    await fs.rm(base, { recursive: true, force: true });
  });

  async function workspace(name: string): Promise<string> {
    const dir = path.join(base, name);
    await fs.mkdir(dir, { recursive: true });
    await fs.chown(dir, 65534, 65534);
    return dir;
  }

  it('creates a hardened, labelled container from its options', async () => {
    const ws = await workspace('hardened');
    const sandbox = await dockerBackend({ image: SANDBOX_IMAGE, executorId, memoryMb: 200, pidsLimit: 99, cpus: 0.5, tmpMb: 12, uid: 65534 }).start({
      workspace: ws,
      limits: DEFAULT_LIMITS,
      tenant: 'backend-hardened',
    });
    try {
      const c = inspectTenant('backend-hardened');
      expect(c.Config.Labels).toMatchObject({ 'toolgate.sandbox': '1', 'toolgate.tenant': 'backend-hardened', 'toolgate.executor': executorId });
      // The container starts as root (its init keeps the channel out of reach); the agent drops to 65534 at once.
      expect(c.Config.User).toBe('0:0');
      expect(c.Config.Cmd).toEqual(expect.arrayContaining(['--run-as', '65534:65534']));
      expect(c.Config).toMatchObject({ OpenStdin: true, StdinOnce: true, Tty: false });
      expect(c.Config.Env.join('\n')).not.toMatch(/TOOLGATE_|JWT|REDIS/);
      expect(c.HostConfig).toMatchObject({
        NetworkMode: 'none',
        ReadonlyRootfs: true,
        CapDrop: ['ALL'],
        CapAdd: ['SETUID', 'SETGID'],
        SecurityOpt: ['no-new-privileges'],
        IpcMode: 'none',
        PidsLimit: 99,
        Memory: 200 * 1024 * 1024,
        MemorySwap: 200 * 1024 * 1024,
        NanoCpus: 500_000_000,
        Init: true,
        Binds: [`${ws}:/workspace:rw`],
        LogConfig: { Type: 'none' },
      });
      expect(c.HostConfig.Tmpfs['/tmp']).toMatch(/size=12m/);
    } finally {
      await sandbox.stop();
    }
    expect(sandboxContainers('backend-hardened')).toEqual([]); // stop() removes it
  });

  it('mounts a workspace under the data directory from the host data directory', async () => {
    const host = await workspace('host-data');
    const seen = path.join(base, 'seen-data'); // the executor's view of the same directory
    await fs.symlink(host, seen);
    await fs.mkdir(path.join(host, 'tenant'));
    await fs.chown(path.join(host, 'tenant'), 65534, 65534);
    const sandbox = await dockerBackend({ executorId, dataDir: seen, hostDataDir: host }).start({
      workspace: path.join(seen, 'tenant'),
      limits: DEFAULT_LIMITS,
      tenant: 'backend-mapped',
    });
    try {
      expect(inspectTenant('backend-mapped').HostConfig.Binds).toEqual([`${path.join(host, 'tenant')}:/workspace:rw`]);
      const w = await callParsing(sandbox, 'write_file', { path: 'hello.txt', content: 'mapped' }, new AbortController().signal);
      expect(w.isError).toBeFalsy();
      expect(await fs.readFile(path.join(host, 'tenant', 'hello.txt'), 'utf8')).toBe('mapped');
    } finally {
      await sandbox.stop();
    }
  });

  it('passes an OCI runtime through, and fails clearly on one the daemon lacks', async () => {
    const ws = await workspace('runtime');
    const sandbox = await dockerBackend({ executorId, runtime: 'runc' }).start({ workspace: ws, limits: DEFAULT_LIMITS, tenant: 'backend-runtime' });
    try {
      expect(inspectTenant('backend-runtime').HostConfig.Runtime).toBe('runc');
    } finally {
      await sandbox.stop();
    }
    await expect(
      dockerBackend({ executorId, runtime: 'no-such-runtime' }).start({ workspace: ws, limits: DEFAULT_LIMITS, tenant: 'backend-runtime' }),
    ).rejects.toThrow(/no-such-runtime/);
    expect(sandboxContainers('backend-runtime')).toEqual([]);
  });

  it('chowns the workspace when asked, and otherwise refuses one the sandbox user cannot write', async () => {
    const ws = path.join(base, 'root-owned');
    await fs.mkdir(ws, { mode: 0o700 });
    await expect(dockerBackend({ executorId }).start({ workspace: ws, limits: DEFAULT_LIMITS, tenant: 'backend-chown' })).rejects.toThrow(
      /not writable by the sandbox user 65534/,
    );
    const sandbox = await dockerBackend({ executorId, chownWorkspace: true }).start({ workspace: ws, limits: DEFAULT_LIMITS, tenant: 'backend-chown' });
    try {
      expect((await fs.stat(ws)).uid).toBe(65534);
      const w = await sandbox.call('write_file', { path: 'ok.txt', content: 'ok' }, new AbortController().signal);
      expect(w.isError).toBeFalsy();
    } finally {
      await sandbox.stop();
    }
  });

  it('says how to build a missing image', async () => {
    const ws = await workspace('no-image');
    await expect(
      dockerBackend({ executorId, image: `${SANDBOX_IMAGE.split(':')[0]}:missing-${process.pid}` }).start({
        workspace: ws,
        limits: DEFAULT_LIMITS,
        tenant: 'backend-noimage',
      }),
    ).rejects.toThrow(/npm run sandbox:image/);
  });

  it("removes exactly its own executor's leftover sandboxes", async () => {
    const other = `${executorId}-other`;
    const create = (executor: string) =>
      docker(
        'create',
        '--network',
        'none',
        '--label',
        'toolgate.sandbox=1',
        '--label',
        `toolgate.executor=${executor}`,
        '--label',
        'toolgate.tenant=backend-stale',
        '--entrypoint',
        'true',
        SANDBOX_IMAGE,
      ).trim();
    const mine = [create(executorId), create(executorId)];
    const theirs = create(other);
    try {
      docker('start', mine[0]!); // one that ran and exited, one never started: both are leftovers
      expect(await cleanupStaleSandboxes(executorId)).toBe(2);
      const left = sandboxContainers('backend-stale');
      expect(left).toHaveLength(1);
      expect(theirs.startsWith(left[0]!)).toBe(true);
      expect(await cleanupStaleSandboxes(executorId)).toBe(0);
    } finally {
      docker('rm', '-f', theirs);
    }
  });
});
