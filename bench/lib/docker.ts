/**
 * Docker for the sandbox benchmarks: whether the docker backend can run here, and the anchors —
 * `docker exec` into a running container of the sandbox image, and dockerode create + start.
 * Only the locally built sandbox image is referenced (no registry is reachable here).
 */
import type Dockerode from 'dockerode';
import { performance } from 'node:perf_hooks';
import { run, which } from './availability';
import { hasProduct } from './product';
import type { Measured } from './alternate';
import type { BenchContext } from './types';

export const SANDBOX_IMAGE = process.env.TOOLGATE_SANDBOX_IMAGE?.trim() || 'toolgate-sandbox:local';
const LABEL = 'toolgate.bench';

export async function dockerReason(_ctx: BenchContext): Promise<string | undefined> {
  if (!hasProduct('executor/sandbox/docker/backend')) return 'the docker sandbox backend is not in this build (executor/sandbox/docker/backend.ts)';
  const docker = which('docker');
  if (!docker) return 'no docker CLI: install and start a Docker engine first (docs/deployment.md)';
  const info = await run(docker, ['info', '--format', '{{.ServerVersion}}'], { timeoutMs: 10_000 });
  if (info.code !== 0) return `dockerd is not reachable (${info.stderr.trim().split('\n')[0]}): start the Docker engine first (docs/deployment.md)`;
  const image = await run(docker, ['image', 'inspect', '--format', '{{.Id}}', SANDBOX_IMAGE], { timeoutMs: 10_000 });
  if (image.code !== 0) return `the sandbox image ${SANDBOX_IMAGE} is not built here`;
  return undefined;
}

export interface DockerAnchor {
  /** `docker exec <container> argv…` through the CLI, as a person (or a naive executor) would. */
  exec(argv: string[], expect: string): Promise<void>;
  /** dockerode create + start of a container of the same image (removed afterwards, untimed). */
  createStart(): Promise<Measured>;
  close(): Promise<void>;
}

function dockerode(): Dockerode {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const D = require('dockerode') as typeof Dockerode;
  return new D();
}

/** The hardening the sandbox uses, so the anchor pays what a real container pays. */
const HOST_CONFIG = {
  NetworkMode: 'none',
  ReadonlyRootfs: true,
  CapDrop: ['ALL'],
  SecurityOpt: ['no-new-privileges'],
  PidsLimit: 128,
  Memory: 256 * 1024 * 1024,
  MemorySwap: 256 * 1024 * 1024,
};

export async function startDockerAnchor(): Promise<DockerAnchor> {
  const docker = dockerode();
  const long = await docker.createContainer({
    Image: SANDBOX_IMAGE,
    Entrypoint: ['sleep', 'infinity'],
    Cmd: [],
    User: '65534:65534',
    Labels: { [LABEL]: '1' },
    HostConfig: HOST_CONFIG,
  });
  await long.start();
  const cli = which('docker')!;
  return {
    exec: async (argv, expect) => {
      const r = await run(cli, ['exec', long.id, ...argv]);
      if (r.code !== 0 || r.stdout !== expect) throw new Error(`docker exec failed (${r.code}): ${r.stderr.trim()}`);
    },
    createStart: async () => {
      const t0 = performance.now();
      const c = await docker.createContainer({
        Image: SANDBOX_IMAGE,
        Entrypoint: ['sleep', 'infinity'],
        Cmd: [],
        User: '65534:65534',
        Labels: { [LABEL]: '1' },
        HostConfig: HOST_CONFIG,
      });
      await c.start();
      const measuredMs = performance.now() - t0;
      await c.remove({ force: true });
      return { measuredMs };
    },
    close: async () => {
      await long.remove({ force: true }).catch(() => undefined);
    },
  };
}

/** The host pid of a container's first process, to read its memory from /proc. */
export async function containerPid(id: string): Promise<number | undefined> {
  const info = await dockerode().getContainer(id).inspect();
  return info.State.Pid || undefined;
}
