/** The workspace-escape suite against the file tools in-process (the `none` wall, no sandbox around it). */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { makeHarness } from '../tools/files/harness';
import { runWorkspaceEscapeSuite } from './workspace-escape.suite';

describe('workspace escape: file tools in-process', () => {
  runWorkspaceEscapeSuite(
    async () => {
      const h = await makeHarness();
      const outside = path.join(h.base, 'outside');
      await fs.mkdir(outside);
      return { call: h.call, root: h.root, outside, cleanup: h.close };
    },
    { name: 'in-process' },
  );
});
