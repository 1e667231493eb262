/**
 * The real `toolgate stdio` binary (dist/bin/toolgate.js, built by `npx tsc -p tsconfig.build.json`)
 * in a child process, against a fresh temp workspace, seen through the WirePeer interface.
 * Every stdout line is kept, so a test can check that stdout carried nothing but JSON-RPC.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { asResponse, PeerOptions, ReplyQueue, WirePeer } from '../protocol/wire';

export const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');

export interface StdioServerOptions extends PeerOptions {
  /** Extra environment (TOOLGATE_* settings). */
  env?: Record<string, string>;
  /** Extra CLI arguments after `stdio --root DIR`. */
  args?: string[];
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export class StdioServer implements WirePeer {
  /** Every line the server wrote to stdout, in order. */
  readonly stdoutLines: string[] = [];
  stderr = '';
  readonly exited: Promise<Exit>;
  private readonly replies = new ReplyQueue();
  private partial = '';

  private constructor(
    readonly child: ChildProcess,
    readonly root: string,
  ) {
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      const parts = (this.partial + chunk).split('\n');
      this.partial = parts.pop()!;
      for (const line of parts) {
        this.stdoutLines.push(line);
        this.replies.push(line);
      }
    });
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      if (this.stderr.length < 1_000_000) this.stderr += chunk;
    });
    // A server that exits on its own closes stdin under us: that is an outcome, not a crash.
    child.stdin!.on('error', () => undefined);
    this.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  }

  static async start(options: StdioServerOptions = {}): Promise<StdioServer> {
    if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build first with \`npx tsc -p tsconfig.build.json\``);
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-stdio-'));
    const args = [BIN, 'stdio', '--root', root];
    if (options.permissions) args.push('--permissions', options.permissions.join(','));
    args.push(...(options.args ?? []));
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('TOOLGATE_')) env[k] = v;
    Object.assign(env, { TOOLGATE_LOG_LEVEL: 'warn', TOOLGATE_DATA_DIR: path.join(root, '.toolgate') }, options.env);
    const child = spawn(process.execPath, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const server = new StdioServer(child, root);
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    return server;
  }

  /** Writes raw bytes to the server's stdin, honouring backpressure. */
  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      this.child.stdin!.write(data, (err) => (err ? reject(err) : resolve()));
    });
  }

  send(frame: string): Promise<void> {
    return this.write(frame + '\n');
  }

  next(timeoutMs?: number): Promise<unknown> {
    return this.replies.next(timeoutMs);
  }

  /** Replies received but not yet read with `next`. */
  get unread(): number {
    return this.replies.buffered;
  }

  /** Closes stdin (EOF) and waits for the process to exit. */
  async endInput(): Promise<Exit> {
    this.child.stdin!.end();
    return this.exited;
  }

  /** Throws unless every stdout line so far is one JSON-RPC 2.0 response or a batch of them. */
  assertOnlyJsonRpc(): void {
    const lines = this.partial === '' ? this.stdoutLines : [...this.stdoutLines, this.partial];
    for (const line of lines) {
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        throw new Error(`stdout carried a line that is not JSON: ${line.slice(0, 200)}`);
      }
      if (Array.isArray(value) && value.length > 0) value.forEach(asResponse);
      else asResponse(value);
    }
  }

  /**
   * Ends the server by closing stdin, then checks what every test of the binary must hold: it
   * exited 0 and its stdout carried only JSON-RPC. Always removes the workspace.
   */
  async close(): Promise<void> {
    try {
      if (this.child.exitCode === null && this.child.signalCode === null) {
        this.child.stdin!.end();
        const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
        const exit = await this.exited;
        clearTimeout(timer);
        if (exit.code !== 0) throw new Error(`toolgate stdio exited with ${JSON.stringify(exit)} on EOF; stderr:\n${this.stderr}`);
      }
      this.assertOnlyJsonRpc();
    } finally {
      await fs.rm(this.root, { recursive: true, force: true });
    }
  }
}
