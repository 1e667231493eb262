import { promises as fs } from 'node:fs';
import { bwrapBackend } from '../../executor/sandbox/bwrap';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { sandboxBackendContract } from './sandbox-backend.suite';

describeIf(hasCommand('bwrap') && isRoot, 'needs bubblewrap (apt-get install bubblewrap) and root', 'bwrap backend', () => {
  sandboxBackendContract('bwrap', {
    backend: () => bwrapBackend(),
    makeWorkspace: (dir) => fs.chown(dir, 65534, 65534),
  });
});
