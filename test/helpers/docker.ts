/**
 * For suites that run the docker sandbox backend. Outside CI they skip (with the reason) when
 * Docker or the sandbox image is missing; in CI they must run, and `ensureSandboxImage` builds
 * the image if it is missing. Wherever an image exists, `ensureSandboxImage` rebuilds it when
 * its inputs changed (the compiled agent, its packages, the Dockerfile), so a suite never runs
 * yesterday's agent. The base images come from NODE_IMAGE / NODE_BUILD_IMAGE, which
 * on a host without a registry name local stand-ins (docs/deployment.md, "Without a registry").
 */
import { execFileSync, spawn } from 'node:child_process';
import * as path from 'node:path';
import { hasCommand } from './availability';

export const SANDBOX_IMAGE = process.env.TOOLGATE_SANDBOX_IMAGE?.trim() || 'toolgate-sandbox:local';
const REPO = path.resolve(__dirname, '../..');

function succeeds(args: string[]): boolean {
  try {
    execFileSync('docker', args, { stdio: 'ignore', timeout: 15_000 });
    return true;
  } catch {
    return false;
  }
}

function why(): string | undefined {
  if (!hasCommand('docker')) return 'needs Docker: a running Docker engine (docs/deployment.md)';
  if (!succeeds(['info', '--format', '{{.ServerVersion}}'])) return 'dockerd is not reachable: start the Docker engine (docs/deployment.md)';
  if (process.env.CI !== 'true' && !succeeds(['image', 'inspect', SANDBOX_IMAGE])) {
    return `the sandbox image ${SANDBOX_IMAGE} is not built: npm run sandbox:image (with NODE_IMAGE/NODE_BUILD_IMAGE naming local base images on a host without a registry)`;
  }
  return undefined;
}

/** Why the docker suites cannot run here, or undefined. Checked once per test file. */
export const dockerUnavailable: string | undefined = why();

/** Builds the sandbox image if it is missing or stale; for a beforeAll (allow it 3 minutes). */
export function ensureSandboxImage(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', [path.join(REPO, 'infra/sandbox/build-image.sh'), '--if-stale'], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`building ${SANDBOX_IMAGE} failed (${code}):\n${out.slice(-3000)}`))));
  });
}

/**
 * Containers of the docker backend still present for this tenant (leaks, for afterAll checks): by
 * its tenant label, or, for a sandbox taken from the warm pool (created before its tenant was
 * known, so its tenant label is empty), by the name it gets when bound, `toolgate-<tenant>-<hex>`.
 * `running`: only those still running.
 */
export function sandboxContainers(tenant: string, running = false): string[] {
  const out = execFileSync(
    'docker',
    ['ps', ...(running ? [] : ['-a']), '--no-trunc', '--filter', 'label=toolgate.sandbox=1', '--format', '{{.ID}} {{.Names}} {{.Label "toolgate.tenant"}}'],
    { encoding: 'utf8' },
  );
  const named = new RegExp(`^toolgate-${tenant.toLowerCase().replace(/[^a-z0-9_.-]+/g, '-')}-[0-9a-f]{8}$`);
  return out
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' '))
    .filter(([, name, label]) => label === tenant || named.test(name ?? ''))
    .map(([id]) => id!);
}
