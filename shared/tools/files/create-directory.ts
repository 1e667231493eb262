import { structuredResult } from '../result';
import { defineTool } from '../tool';

export const createDirectory = defineTool({
  name: 'create_directory',
  title: 'Create directory',
  description: 'Create a directory in the workspace, with any missing parents. Succeeds if it already exists.',
  permission: 'file:write',
  host: 'sandbox',
  input: (z) => z.object({ path: z.string().describe('Directory path, relative to the workspace root or absolute inside it') }),
  output: (z) => z.object({ path: z.string(), created: z.boolean() }),
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run({ path }, { workspace }) {
    const shown = workspace.shown(path);
    // Whether it existed is read first; the creation itself happens inside pinned parents.
    const existed = await workspace.openDir(path).then(
      (d) => {
        d.close();
        return true;
      },
      () => false,
    );
    (await workspace.openDir(path, { create: true })).close();
    return structuredResult({ path: shown, created: !existed }, existed ? `Directory already exists: ${shown}` : `Created directory ${shown}`);
  },
});
