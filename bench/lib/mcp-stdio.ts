/**
 * An MCP server over stdio driven by the official SDK client, the way an agent drives it. The
 * client validates every structuredContent against the tool's outputSchema (after listTools), on
 * both sides alike.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

export interface StdioServer {
  client: Client;
  pid: number;
  /** One tools/call; rejects when the call fails or returns isError. */
  call(name: string, args: Record<string, unknown>): Promise<unknown>;
  stderr(): string;
  close(): Promise<void>;
}

export async function connectStdio(label: string, command: string, args: string[], env: Record<string, string> = {}, cwd?: string): Promise<StdioServer> {
  const transport = new StdioClientTransport({ command, args, env: { ...getDefaultEnvironment(), ...env }, stderr: 'pipe', ...(cwd ? { cwd } : {}) });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-8000)));
  const client = new Client({ name: 'toolgate-bench', version: '1.0.0' });
  try {
    await client.connect(transport);
    await client.listTools(); // the SDK caches output schemas from here on
  } catch (err) {
    await client.close().catch(() => undefined);
    throw new Error(`${label} did not start: ${err instanceof Error ? err.message : String(err)}\n${stderr.trim()}`);
  }
  const pid = transport.pid;
  if (pid === null) throw new Error(`${label}: no pid`);
  return {
    client,
    pid,
    async call(name, callArgs) {
      const result = await client.callTool({ name, arguments: callArgs });
      if (result.isError) throw new Error(`${label} ${name} returned isError: ${JSON.stringify(result.content).slice(0, 300)}`);
      return result;
    },
    stderr: () => stderr,
    close: () => client.close(),
  };
}
