import { PERMISSIONS } from '../../../shared/auth/permissions';
import { FILE_TOOLS } from '../../../shared/tools/files/index';
import { ToolRegistry } from '../../../shared/tools/registry';

/** The README's Permissions table: which permission each file tool needs. */
const EXPECTED: Record<string, string> = {
  read_file: 'file:read',
  read_multiple_files: 'file:read',
  search_text: 'file:read',
  list_directory: 'file:list',
  directory_tree: 'file:list',
  search_files: 'file:list',
  get_file_info: 'file:list',
  write_file: 'file:write',
  edit_file: 'file:write',
  create_directory: 'file:write',
  move_path: 'file:write',
  delete_path: 'file:write',
};

describe('the file tool family', () => {
  const registry = new ToolRegistry(FILE_TOOLS);

  it("holds exactly the twelve tools, each with the permission the README's Permissions table gives it", () => {
    expect(Object.fromEntries(FILE_TOOLS.map((t) => [t.name, t.permission]))).toEqual(EXPECTED);
  });

  it('runs every tool in the sandbox, with an output schema and honest annotations', () => {
    for (const tool of FILE_TOOLS) {
      expect(tool.host).toBe('sandbox');
      expect(tool.output).toBeDefined();
      expect(tool.annotations.openWorldHint).toBe(false);
      expect(tool.annotations.readOnlyHint).toBe(tool.permission !== 'file:write');
      if (tool.permission === 'file:write') expect(typeof tool.annotations.destructiveHint).toBe('boolean');
      expect(tool.description.length).toBeGreaterThan(40);
    }
  });

  it('lists each tool only for its permission', () => {
    for (const permission of PERMISSIONS) {
      const names = registry
        .listFor(new Set([permission]))
        .tools.map((t) => t.name)
        .sort();
      expect(names).toEqual(
        Object.keys(EXPECTED)
          .filter((n) => EXPECTED[n] === permission)
          .sort(),
      );
    }
  });

  it('publishes the fixed parameter names', () => {
    const props = (name: string) =>
      Object.keys((registry.listFor(new Set(PERMISSIONS)).tools.find((t) => t.name === name)!.inputSchema.properties ?? {}) as object);
    expect(props('read_file')).toEqual(expect.arrayContaining(['path', 'offset', 'length', 'head', 'tail', 'encoding']));
    expect(props('read_multiple_files')).toEqual(expect.arrayContaining(['paths']));
    expect(props('write_file')).toEqual(expect.arrayContaining(['path', 'content', 'encoding', 'mode']));
    expect(props('edit_file')).toEqual(expect.arrayContaining(['path', 'edits', 'dryRun']));
    expect(props('directory_tree')).toEqual(expect.arrayContaining(['path', 'excludePatterns', 'maxDepth']));
    expect(props('move_path')).toEqual(expect.arrayContaining(['source', 'destination']));
    expect(props('delete_path')).toEqual(expect.arrayContaining(['path', 'recursive']));
    expect(props('search_files')).toEqual(expect.arrayContaining(['path', 'pattern', 'excludePatterns']));
    expect(props('search_text')).toEqual(expect.arrayContaining(['path', 'query', 'regex', 'caseSensitive', 'include', 'maxResults']));
    for (const n of ['create_directory', 'list_directory', 'get_file_info']) expect(props(n)).toContain('path');
  });
});
