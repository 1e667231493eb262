import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { sandboxEgressSuite } from './sandbox-egress.suite';

jest.setTimeout(60_000);

describeIf(
  hasCommand('bwrap') && isRoot && hasCommand('curl') && hasCommand('git'),
  'needs root, bubblewrap, curl and git',
  'egress from bwrap sandboxes',
  () => {
    sandboxEgressSuite({ env: { TOOLGATE_SANDBOX: 'bwrap' }, flood: 40 });
  },
);
