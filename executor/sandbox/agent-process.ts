/**
 * A sandbox agent running as a child process (directly, or wrapped by bwrap): its stdio carries
 * JSON-RPC, its stderr is kept (the tail) to explain a failed start or a crash.
 */
import { ChildProcess, spawn } from 'node:child_process';
import * as path from 'node:path';
import { JsonRpcClient } from '../../shared/protocol/client';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import type { ToolResult } from '../../shared/tools/tool';
import { StdioTransport } from '../../shared/transport/stdio';
import type { Sandbox, SandboxSpec } from './backend';

/**
 * The compiled agent entry point. From dist/ it sits beside this file's folder; when this file
 * runs from source (ts-jest), the agent still runs compiled, from dist/.
 */
export const AGENT_MAIN = __dirname.split(path.sep).includes('dist')
  ? path.resolve(__dirname, '../agent/main.js')
  : path.resolve(__dirname, '../../dist/executor/agent/main.js');
const STDERR_TAIL_BYTES = 4096;
const MAX_REPLY_BYTES = 256 * 1024 * 1024;

export interface AgentCommand {
  file: string;
  args: string[];
  /** The agent's complete environment: nothing of the server's own is passed on. */
  env: Record<string, string>;
}

export interface AgentProcessOptions {
  startTimeoutMs: number;
  onStderr?: (line: string) => void;
}

export class AgentProcess implements Sandbox {
  readonly exited: Promise<string>;
  private isAlive = true;
  private stderrTail = '';
  private readonly client: JsonRpcClient;

  private constructor(private readonly child: ChildProcess, options: AgentProcessOptions) {
    this.client = new JsonRpcClient(
      new StdioTransport(child.stdout!, child.stdin!, MAX_REPLY_BYTES),
      // stdout ends just before the exit status is known: wait for it to say why.
      () => this.exited.then((reason) => new ProtocolError(ErrorCode.Unavailable, `Sandbox unavailable: ${reason}`)),
    );
    child.stdin!.on('error', () => undefined); // EPIPE after the agent died is reported through 'exit'
    child.stderr!.setEncoding('utf8').on('data', (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-STDERR_TAIL_BYTES);
      if (options.onStderr) for (const line of text.split('\n')) if (line) options.onStderr(line);
    });
    this.exited = new Promise((resolve) => {
      child.once('error', (err) => {
        this.isAlive = false;
        const reason = `the sandbox agent could not be started: ${err.message}`;
        this.client.failAll(new ProtocolError(ErrorCode.Unavailable, reason));
        resolve(reason);
      });
      child.once('close', (code, signal) => {
        this.isAlive = false;
        const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
        const reason = `the sandbox agent ${how}${this.stderrTail ? `: ${lastLine(this.stderrTail)}` : ''}`;
        this.client.failAll(new ProtocolError(ErrorCode.Unavailable, `Sandbox unavailable: ${reason}`));
        resolve(reason);
      });
    });
  }

  /** Spawns the agent and waits until it answers a ping. */
  static async start(command: AgentCommand, spec: SandboxSpec, options: AgentProcessOptions): Promise<AgentProcess> {
    const child = spawn(command.file, command.args, { env: command.env, stdio: ['pipe', 'pipe', 'pipe'], cwd: spec.workspace });
    const agent = new AgentProcess(child, options);
    await agent.client.start();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${options.startTimeoutMs} ms`)), options.startTimeoutMs);
    });
    try {
      await Promise.race([agent.client.request('ping', undefined), timeout]);
    } catch (err) {
      child.kill('SIGKILL');
      const reason = await agent.exited;
      throw new Error(`sandbox failed to start (${err instanceof Error ? err.message : String(err)}); ${reason}`);
    } finally {
      clearTimeout(timer);
    }
    return agent;
  }

  get alive(): boolean {
    return this.isAlive;
  }

  async call(tool: string, args: unknown, signal: AbortSignal): Promise<ToolResult> {
    return (await this.client.request('tools/call', { name: tool, arguments: args as Record<string, unknown> }, signal)) as ToolResult;
  }

  async stop(): Promise<void> {
    if (!this.isAlive) return;
    // Closing stdin asks the agent to end its processes and exit; SIGKILL if it does not.
    this.child.stdin!.end();
    const killer = setTimeout(() => this.child.kill('SIGKILL'), 2000);
    await this.exited;
    clearTimeout(killer);
  }
}

function lastLine(text: string): string {
  const lines = text.trim().split('\n');
  return lines[lines.length - 1] ?? '';
}
