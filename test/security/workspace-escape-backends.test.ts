/**
 * The workspace-escape suite through a real sandbox agent on each backend: the same routes and
 * tools as in-process, now with the agent's own wall (and, for bwrap, the sandbox around it).
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { SandboxBackend } from '../../executor/sandbox/backend';
import { bwrapBackend } from '../../executor/sandbox/bwrap';
import { dockerBackend } from '../../executor/sandbox/docker/backend';
import { inProcessBackend } from '../../executor/sandbox/in-process';
import { noneBackend } from '../../executor/sandbox/none';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage } from '../helpers/docker';
import { EscapeTarget, runWorkspaceEscapeSuite } from './workspace-escape.suite';

async function target(backend: SandboxBackend, sandboxUser?: number): Promise<EscapeTarget> {
  const base = await fs.mkdtemp(path.join(os.tmpdir(), `tg-escape-${backend.name}-`));
  const root = path.join(base, 'root');
  const outside = path.join(base, 'outside');
  await fs.mkdir(root);
  await fs.mkdir(outside);
  if (sandboxUser !== undefined) {
    await fs.chmod(base, 0o755); // the sandbox user must reach its workspace's bind source
    await fs.chown(root, sandboxUser, sandboxUser);
  }
  const sandbox = await backend.start({ workspace: root, limits: DEFAULT_LIMITS, tenant: 'escape' });
  const never = new AbortController().signal;
  return {
    call: (name, args) => sandbox.call(name, args, never),
    root,
    outside,
    rootAsSeen: sandboxUser === undefined ? root : '/workspace',
    cleanup: async () => {
      await sandbox.stop();
      await fs.rm(base, { recursive: true, force: true });
    },
  };
}

describe('workspace escape: none backend (agent process)', () => {
  runWorkspaceEscapeSuite(() => target(noneBackend()), { raceIterations: 200, name: 'none' });
});

describe('workspace escape: none backend in-process (serve embedded)', () => {
  runWorkspaceEscapeSuite(() => target(inProcessBackend()), { raceIterations: 200, name: 'none-in-process' });
});

describeIf(hasCommand('bwrap') && isRoot, 'needs bubblewrap and root', 'workspace escape: bwrap backend', () => {
  runWorkspaceEscapeSuite(() => target(bwrapBackend(), 65534), { raceIterations: 200, name: 'bwrap' });
});

describeIf(!dockerUnavailable, dockerUnavailable ?? '', 'workspace escape: docker backend', () => {
  beforeAll(() => ensureSandboxImage(), 180_000);
  runWorkspaceEscapeSuite(() => target(dockerBackend(), 65534), { raceIterations: 200, name: 'docker' });
});
