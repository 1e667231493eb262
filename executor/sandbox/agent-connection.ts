/**
 * A live sandbox agent, whatever runs it (a child process, bwrap, a container): JSON-RPC over
 * its stdin/stdout, the tail of its stderr kept to explain a failed start or a crash, and every
 * pending call failed with that explanation the moment the agent is gone.
 */
import type { Readable, Writable } from 'node:stream';
import { JsonRpcClient } from '../../shared/protocol/client';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import type { ToolResult } from '../../shared/tools/tool';
import { StdioTransport } from '../../shared/transport/stdio';
// The agent is untrusted: what it reports is cleaned and capped before it travels further.
import { clean } from '../../shared/tools/commands/last-line';
import type { Sandbox } from './backend';

const STDERR_TAIL_BYTES = 4096;
const MAX_REPLY_BYTES = 256 * 1024 * 1024;

/** The raw pipes to an agent and how to learn of (or force) its end. */
export interface AgentChannel {
  stdout: Readable;
  stdin: Writable;
  stderr?: Readable;
  /** Resolves once the agent is gone, with a sentence saying how ("exited with code 1"). */
  exited: Promise<string>;
  /** Ends the agent at once. */
  kill(): void;
}

export interface AgentConnectionOptions {
  startTimeoutMs: number;
  onStderr?: (line: string) => void;
}

export class AgentConnection implements Sandbox {
  readonly exited: Promise<string>;
  private isAlive = true;
  private stderrTail = '';
  private readonly client: JsonRpcClient;

  private constructor(private readonly channel: AgentChannel, options: AgentConnectionOptions) {
    this.exited = channel.exited.then((how) => {
      this.isAlive = false;
      const reason = `the sandbox agent ${how}${this.stderrTail ? `: ${lastLine(this.stderrTail)}` : ''}`;
      this.client.failAll(new ProtocolError(ErrorCode.Unavailable, `Sandbox unavailable: ${reason}`));
      return reason;
    });
    this.client = new JsonRpcClient(
      new StdioTransport(channel.stdout, channel.stdin, MAX_REPLY_BYTES),
      // stdout ends just before the exit status is known: wait for it to say why.
      () => this.exited.then((reason) => new ProtocolError(ErrorCode.Unavailable, `Sandbox unavailable: ${reason}`)),
    );
    channel.stdin.on('error', () => undefined); // EPIPE after the agent died is reported through `exited`
    channel.stderr?.setEncoding('utf8').on('data', (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-STDERR_TAIL_BYTES);
      if (options.onStderr) for (const line of text.split('\n')) if (line) options.onStderr(line);
    });
  }

  /** Connects to the agent and waits until it answers a ping; on failure, ends it and says why. */
  static async open(channel: AgentChannel, options: AgentConnectionOptions): Promise<AgentConnection> {
    const agent = new AgentConnection(channel, options);
    await agent.client.start();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${options.startTimeoutMs} ms`)), options.startTimeoutMs);
    });
    try {
      await Promise.race([agent.client.request('ping', undefined), timeout]);
    } catch (err) {
      channel.kill();
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

  async call(tool: string, args: unknown, signal: AbortSignal, onProgress?: (message: string) => void): Promise<ToolResult> {
    return (await this.client.request('tools/call', { name: tool, arguments: args as Record<string, unknown> }, signal, onProgress && ((message) => onProgress(clean(message))))) as ToolResult;
  }

  async stop(): Promise<void> {
    if (!this.isAlive) return;
    // Closing stdin asks the agent to end its processes and exit; kill it if it does not.
    this.channel.stdin.end();
    const killer = setTimeout(() => this.channel.kill(), 2000);
    await this.exited;
    clearTimeout(killer);
  }
}

function lastLine(text: string): string {
  const lines = text.trim().split('\n');
  return lines[lines.length - 1] ?? '';
}
