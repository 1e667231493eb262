/**
 * A live sandbox agent, whatever runs it (a child process, bwrap, a container): JSON-RPC over
 * its stdin/stdout, read defensively (agent-client.ts: a violation ends this sandbox and fails
 * only its calls), the tail of its stderr kept to explain a failed start or a crash and logged
 * within a budget, and every pending call failed with that explanation the moment the agent is
 * gone.
 */
import type { Readable, Writable } from 'node:stream';
import type { ToolLimits } from '../../shared/limits';
import { ErrorCode, ProtocolError } from '../../shared/protocol/errors';
import { CallSignal, signalOf } from '../../shared/tools/runner';
import type { ToolResult } from '../../shared/tools/tool';
import { StdioTransport } from '../../shared/transport/stdio';
// The agent is untrusted: what it reports is cleaned and capped before it travels further.
import { clean } from '../../shared/tools/commands/last-line';
import { BIND_METHOD, BoundRoot, PING, ToolCallParams, TOOLS_CALL } from '../agent/protocol';
import { AgentClient, checkToolResult } from './agent-client';
import type { Sandbox } from './backend';
import { ArgsTranslator, hostPathTranslator } from './host-paths';
import { ProcessEnds } from './process-ends';
import { agentReplyLimits } from './reply-limits';

const STDERR_TAIL_BYTES = 4096;
/**
 * Stderr lines logged per sandbox and window: the agent writes there only when something is
 * wrong, and whatever floods it (a subverted agent, a command holding a copy of the pipe) must
 * not flood the executor's log. Longer lines are cut.
 */
const STDERR_LINES_PER_WINDOW = 50;
const STDERR_WINDOW_MS = 60_000;
const STDERR_LINE_CHARS = 1000;

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
  /** The limits the agent enforces: they bound the size of its replies. */
  limits: ToolLimits;
  /** The workspace's host path: absolute paths inside it are made relative before a call goes out (host-paths.ts). */
  hostRoot?: string;
  onStderr?: (line: string) => void;
}

export class AgentConnection implements Sandbox {
  readonly exited: Promise<string>;
  private isAlive = true;
  private stderrTail = '';
  private violation: string | undefined;
  private readonly client: AgentClient;
  private translate: ArgsTranslator;
  private readonly processEnds = new ProcessEnds();

  private constructor(
    private readonly channel: AgentChannel,
    options: AgentConnectionOptions,
  ) {
    this.exited = channel.exited.then((how) => {
      this.isAlive = false;
      const reason = this.violation
        ? `the sandbox agent broke the executor's protocol (${this.violation}) and was ended`
        : `the sandbox agent ${how}${this.stderrTail ? `: ${lastLine(this.stderrTail)}` : ''}`;
      this.client.failAll(new ProtocolError(ErrorCode.Unavailable, `Sandbox unavailable: ${reason}`));
      // Its processes ended with it.
      this.processEnds.endAll();
      return reason;
    });
    this.translate = options.hostRoot ? hostPathTranslator(options.hostRoot) : (args) => args;
    const replyLimits = agentReplyLimits(options.limits);
    this.client = new AgentClient(
      new StdioTransport(channel.stdout, channel.stdin, replyLimits.maxFrameBytes),
      {
        ...replyLimits,
        onViolation: (reason) => {
          this.violation = reason;
          channel.kill();
        },
        onProcessEnded: (handle) => this.processEnds.ended(handle),
      },
      // stdout ends just before the exit status is known: wait for it to say why.
      () => this.exited.then((reason) => new ProtocolError(ErrorCode.Unavailable, `Sandbox unavailable: ${reason}`)),
    );
    channel.stdin.on('error', () => undefined); // EPIPE after the agent died is reported through `exited`
    let windowStart = Date.now();
    let logged = 0;
    channel.stderr?.setEncoding('utf8').on('data', (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-STDERR_TAIL_BYTES);
      if (!options.onStderr) return;
      for (const line of text.split('\n')) {
        if (!line) continue;
        if (Date.now() - windowStart > STDERR_WINDOW_MS) {
          windowStart = Date.now();
          logged = 0;
        }
        if (++logged <= STDERR_LINES_PER_WINDOW) options.onStderr(line.slice(0, STDERR_LINE_CHARS));
        else if (logged === STDERR_LINES_PER_WINDOW + 1)
          options.onStderr(`(more stderr lines from this sandbox are not logged for up to ${STDERR_WINDOW_MS / 1000} s)`);
      }
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
      await Promise.race([agent.client.request(PING, undefined), timeout]);
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

  async call(tool: string, args: unknown, signal: CallSignal, onProgress?: (message: string) => void): Promise<ToolResult> {
    // Parsed by the caller (the Sandbox contract): the agent runs them as they arrive.
    const params = { name: tool, arguments: this.translate(args) as Record<string, unknown> } satisfies ToolCallParams;
    return (await this.client.request(TOOLS_CALL, params, signalOf(signal), {
      check: checkToolResult,
      ...(onProgress ? { onProgress: (message: string) => onProgress(clean(message)) } : {}),
    })) as ToolResult;
  }

  processEnded(handle: string): Promise<void> {
    return this.isAlive ? this.processEnds.wait(handle) : Promise.resolve();
  }

  /**
   * Binds a pre-started agent (one started with `--await-bind`, agent/bind.ts) to the workspace
   * now mounted at its root, whose host path is `hostRoot`; resolves with the device and inode the
   * agent sees there, for the caller to compare with the host's. Host paths are translated from now on.
   */
  async bind(hostRoot: string): Promise<BoundRoot> {
    const r = (await this.client.request(BIND_METHOD, undefined)) as Partial<BoundRoot> | null;
    if (typeof r?.dev !== 'number' || typeof r.ino !== 'number') throw new Error('the agent answered the bind without a device and inode');
    this.translate = hostPathTranslator(hostRoot);
    return { dev: r.dev, ino: r.ino };
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
