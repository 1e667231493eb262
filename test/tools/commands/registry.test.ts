import { COMMAND_TOOLS } from '../../../shared/tools/commands/index';
import { ToolRegistry } from '../../../shared/tools/registry';

test('the six command tools register with system:exec, the sandbox host and JSON schemas', () => {
  const registry = new ToolRegistry(COMMAND_TOOLS);
  expect(registry.names).toEqual(['run_command', 'start_process', 'read_process_output', 'write_process_input', 'kill_process', 'list_processes']);
  for (const tool of COMMAND_TOOLS) {
    expect(tool.permission).toBe('system:exec');
    expect(tool.host).toBe('sandbox');
    expect(tool.annotations.openWorldHint).toBe(false);
  }
  const listed = registry.listFor(new Set(['system:exec'])).tools;
  expect(listed).toHaveLength(6);
  for (const t of listed) expect(t.outputSchema).toMatchObject({ type: 'object' });
  expect(registry.listFor(new Set(['file:read'])).tools).toHaveLength(0);

  const run = listed.find((t) => t.name === 'run_command')!;
  expect(Object.keys(run.inputSchema.properties as object)).toEqual(['command', 'argv', 'cwd', 'env', 'stdin', 'timeout_ms']);
  expect(run.annotations).toMatchObject({ destructiveHint: true, idempotentHint: false });
  expect(listed.find((t) => t.name === 'list_processes')!.annotations.readOnlyHint).toBe(true);
  expect(listed.find((t) => t.name === 'read_process_output')!.annotations.readOnlyHint).toBe(true);
});
