import { isRoot } from '../helpers/availability';
import { describeIf } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, SANDBOX_IMAGE } from '../helpers/docker';
import { sandboxEgressSuite } from './sandbox-egress.suite';

jest.setTimeout(60_000);

// The executor's default warm pool is on: the first tenants take pre-started sandboxes, whose
// egress channel opens at bind; later ones start fresh. Both paths run here.
const why = dockerUnavailable ?? (isRoot ? undefined : 'the docker sandboxes of an executor need root (workspace ownership, the warm pool)');
describeIf(why === undefined, why ?? '', 'egress from docker sandboxes', () => {
  beforeAll(() => ensureSandboxImage(), 180_000);
  sandboxEgressSuite({ env: { TOOLGATE_SANDBOX: 'docker', TOOLGATE_SANDBOX_IMAGE: SANDBOX_IMAGE, TOOLGATE_SANDBOX_POOL_SIZE: '1' }, flood: 30, python: 'no' });
});
