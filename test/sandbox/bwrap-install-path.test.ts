/**
 * The bwrap sandbox works wherever the package is installed. A copy of the built package (dist,
 * package.json, node_modules: hard links, no symlinks) lives below /tmp, under a 0700 parent, in
 * a folder whose name has a space; `toolgate stdio --sandbox bwrap` runs from that copy, and the
 * tools that load a package on first use (edit_file: diff; start_process with a pty: node-pty)
 * work. The sandbox has its own /tmp and the agent drops to the workspace owner's uid, so code
 * seen at its host path would be hidden from it.
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { promises as fs, realpathSync } from 'node:fs';
import * as path from 'node:path';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';

const REPO = path.resolve(__dirname, '../..');
const OWNER = 1000;

/** Hard links where the file system allows them (fast), else a plain copy; never symlinks. */
function copyTree(from: string, to: string): void {
  try {
    execFileSync('cp', ['-al', from, to]);
  } catch {
    execFileSync('cp', ['-r', from, to]);
  }
}

/** A line-based JSON-RPC client of the spawned server. */
class Client {
  private buffer = '';
  private readonly waiting = new Map<number, (reply: { result?: Record<string, unknown>; error?: unknown }) => void>();
  private nextId = 1;
  stderr = '';
  constructor(readonly child: ChildProcess) {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (this.buffer + chunk).split('\n');
      this.buffer = lines.pop()!;
      for (const line of lines) {
        const reply = JSON.parse(line) as { id: number; result?: Record<string, unknown> };
        this.waiting.get(reply.id)?.(reply);
      }
    });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
  }
  request(method: string, params: unknown): Promise<{ result?: Record<string, unknown>; error?: unknown }> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.child.stdin!.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    });
  }
  async call(name: string, args: Record<string, unknown>): Promise<{ isError?: boolean; structuredContent?: Record<string, unknown>; text: string }> {
    const reply = await this.request('tools/call', { name, arguments: args });
    if (!reply.result) throw new Error(`${name}: ${JSON.stringify(reply.error)}\n${this.stderr}`);
    const content = reply.result.content as Array<{ text: string }>;
    return { ...reply.result, text: content.map((c) => c.text).join('') };
  }
}

describeIf(
  hasCommand('bwrap') && isRoot,
  'needs bubblewrap and root (the sandbox drops to the workspace owner)',
  'bwrap: the package installed anywhere',
  () => {
    let home: string;
    let workspace: string;
    let client: Client;

    beforeAll(async () => {
      home = await fs.mkdtemp('/tmp/toolgate-home-');
      await fs.chmod(home, 0o700);
      const pkg = path.join(home, 'my tools', 'toolgate');
      await fs.mkdir(pkg, { recursive: true });
      copyTree(path.join(REPO, 'dist'), path.join(pkg, 'dist'));
      copyTree(realpathSync(path.join(REPO, 'node_modules')), path.join(pkg, 'node_modules'));
      await fs.copyFile(path.join(REPO, 'package.json'), path.join(pkg, 'package.json'));
      workspace = await fs.mkdtemp('/tmp/toolgate-ws-');
      await fs.writeFile(path.join(workspace, 'notes.txt'), 'hello\n');
      await fs.chown(path.join(workspace, 'notes.txt'), OWNER, OWNER);
      await fs.chown(workspace, OWNER, OWNER);
      const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', TOOLGATE_LOG_LEVEL: 'warn', TOOLGATE_DATA_DIR: path.join(home, 'data') };
      const child = spawn(process.execPath, [path.join(pkg, 'dist/bin/toolgate.js'), 'stdio', '--sandbox', 'bwrap', '--root', workspace], {
        cwd: '/',
        env,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      client = new Client(child);
      const init = await client.request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } });
      expect(init.result).toBeDefined();
    }, 60_000);

    afterAll(async () => {
      if (client) {
        client.child.stdin!.end();
        await new Promise((resolve) => client.child.once('exit', resolve));
      }
      await fs.rm(home, { recursive: true, force: true });
      await fs.rm(workspace, { recursive: true, force: true });
    });

    it('edit_file loads its diff module inside the sandbox', async () => {
      const r = await client.call('edit_file', { path: 'notes.txt', edits: [{ oldText: 'hello', newText: 'bye' }] });
      expect(r.isError).toBeUndefined();
      expect(r.text).toContain('+bye');
      expect(await fs.readFile(path.join(workspace, 'notes.txt'), 'utf8')).toBe('bye\n');
    });

    it('start_process with a pty loads node-pty inside the sandbox', async () => {
      const started = await client.call('start_process', { command: 'echo "pty says $((6 * 7))"', pty: true });
      expect(started.isError).toBeUndefined();
      const handle = started.structuredContent!.handle as string;
      let output = '';
      for (let i = 0; i < 20 && !output.includes('pty says 42'); i++) {
        const r = await client.call('read_process_output', { handle, offset: 0, wait_ms: 500 });
        output = r.structuredContent!.data as string;
      }
      expect(output).toContain('pty says 42');
    });
  },
);
