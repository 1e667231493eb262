import { spawnSync } from 'node:child_process';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';

/** The host's /usr/bin/python3 (what bwrap sandboxes see) with requests and pip. */
const pythonMissing = () =>
  spawnSync('/usr/bin/python3', ['-c', 'import requests, pip']).status === 0
    ? undefined
    : 'needs /usr/bin/python3 with requests and pip (Debian: python3-requests, python3-pip)';
import { sandboxEgressSuite } from './sandbox-egress.suite';

jest.setTimeout(60_000);

describeIf(
  hasCommand('bwrap') && isRoot && hasCommand('curl') && hasCommand('git'),
  'needs root, bubblewrap, curl and git',
  'egress from bwrap sandboxes',
  () => {
    sandboxEgressSuite({ env: { TOOLGATE_SANDBOX: 'bwrap' }, flood: 40, python: { missing: pythonMissing() } });
  },
);
