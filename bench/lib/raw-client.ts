/**
 * A bare JSON-RPC client over a child's stdin/stdout: one line out, one line back, matched by id,
 * JSON.parse and nothing else. It takes the SDK client's own cost
 * (zod parsing, outputSchema validation) out of the figure, to show what the server itself costs.
 */
import { ChildProcess, spawn } from 'node:child_process';

export interface RawServer {
  pid: number;
  request(method: string, params?: unknown): Promise<string>;
  /** tools/call; rejects on a JSON-RPC error or an isError result. */
  call(name: string, args: Record<string, unknown>): Promise<string>;
  stderr(): string;
  close(): Promise<void>;
}

export async function spawnRaw(
  label: string,
  command: string,
  args: string[],
  env: Record<string, string>,
  options: { initialize?: boolean; cwd?: string } = {},
): Promise<RawServer> {
  const child: ChildProcess = spawn(command, args, { env, stdio: ['pipe', 'pipe', 'pipe'], ...(options.cwd ? { cwd: options.cwd } : {}) });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-8000)));
  const pending = new Map<number, { resolve(line: string): void; reject(err: Error): void }>();
  let nextId = 1;
  let buffered = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => {
    for (const p of pending.values()) p.reject(new Error(`${label} exited: ${stderr.trim().split('\n').pop() ?? ''}`));
    pending.clear();
  });
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    let nl: number;
    while ((nl = buffered.indexOf('\n')) !== -1) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      let reply: { id?: unknown; error?: unknown; result?: { isError?: unknown } };
      try {
        reply = JSON.parse(line) as typeof reply;
      } catch {
        continue;
      }
      const p = typeof reply.id === 'number' ? pending.get(reply.id) : undefined;
      if (!p) continue;
      pending.delete(reply.id as number);
      if (reply.error !== undefined) p.reject(new Error(`${label}: ${line.slice(0, 300)}`));
      else if (reply.result?.isError === true) p.reject(new Error(`${label} returned isError: ${line.slice(0, 300)}`));
      else p.resolve(line);
    }
  });
  const request = (method: string, params?: unknown) =>
    new Promise<string>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      child.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) })}\n`);
    });
  const server: RawServer = {
    pid: child.pid!,
    request,
    call: (name, callArgs) => request('tools/call', { name, arguments: callArgs }),
    stderr: () => stderr,
    async close() {
      child.stdin!.end();
      const killer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(killer);
    },
  };
  try {
    if (options.initialize !== false) {
      await request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'toolgate-bench-raw', version: '1.0.0' } });
      child.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    } else {
      await request('ping');
    }
  } catch (err) {
    await server.close();
    throw new Error(`${label} did not start: ${err instanceof Error ? err.message : String(err)}\n${stderr.trim()}`);
  }
  return server;
}
