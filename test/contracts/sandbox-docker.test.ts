import { promises as fs } from 'node:fs';
import { dockerBackend } from '../../executor/sandbox/docker';
import { describeIf } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, SANDBOX_IMAGE, sandboxContainers } from '../helpers/docker';
import { sandboxBackendContract } from './sandbox-backend.suite';

describeIf(!dockerUnavailable, dockerUnavailable ?? '', 'docker backend', () => {
  beforeAll(() => ensureSandboxImage(), 180_000);

  sandboxBackendContract('docker', {
    backend: () => dockerBackend({ image: SANDBOX_IMAGE }),
    makeWorkspace: (dir) => fs.chown(dir, 65534, 65534),
  });

  it('leaves no container behind', () => {
    expect(sandboxContainers('contract')).toEqual([]);
  });
});
