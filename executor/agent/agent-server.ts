/**
 * The agent's side of protocol.ts: frames from the executor in, replies and notifications out,
 * requests served concurrently, a cancelled request aborted and left unanswered, and a drain when
 * the executor closes the channel. Its peer is trusted (protocol.ts says why): nothing here checks
 * a permission or parses a tool's arguments.
 */
import { RequestCancel } from '../../shared/protocol/dispatcher';
import { ErrorCode, ProtocolError, toErrorObject } from '../../shared/protocol/errors';
import { classify, failure, JsonRpcId, JsonRpcParams, parseJson } from '../../shared/protocol/jsonrpc';
import { latestWins } from '../../shared/latest-wins';
import { errorResult } from '../../shared/tools/result';
import type { CallExtras, CallSignal } from '../../shared/tools/runner';
import { unknownToolMessage } from '../../shared/tools/suggest';
import type { AnyTool, ToolResult } from '../../shared/tools/tool';
import { FrameTooLargeError, Transport } from '../../shared/transport/transport';
import { BIND_METHOD, BoundRoot, CANCELLED, PING, PROGRESS, PROGRESS_GAP_MS, TOOLS_CALL } from './protocol';

/** Runs a sandbox tool on arguments already parsed; a tool's failure is an `isError` result. */
export interface AgentTools {
  run(tool: AnyTool, args: unknown, signal: CallSignal, extras?: CallExtras): Promise<ToolResult>;
}

export interface AgentServerOptions {
  tools: ReadonlyMap<string, AnyTool>;
  runner: AgentTools;
  /** Serves `sandbox/bind` (a pre-started agent only). */
  bind?: () => Promise<BoundRoot>;
  /** How long, after the executor closed the channel, running calls may still finish. */
  drainMs: number;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export class AgentServer {
  private readonly running = new Map<JsonRpcId, RequestCancel>();
  private readonly work = new Set<Promise<void>>();
  private readonly closed: Promise<void>;
  private resolveClosed!: () => void;

  constructor(
    private readonly transport: Transport,
    private readonly options: AgentServerOptions,
  ) {
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
  }

  async start(): Promise<void> {
    this.transport.onmessage = (frame) => this.onFrame(frame);
    this.transport.onerror = (err) => {
      if (err instanceof FrameTooLargeError)
        this.send(failure(null, { code: ErrorCode.MessageTooLarge, message: `Message too large: ${err.message}`, data: { limit: err.limit } }));
    };
    this.transport.onclose = () => this.resolveClosed();
    await this.transport.start();
  }

  /** Sends a notification of the agent's own (a process ended). */
  notify(method: string, params: Record<string, unknown>): void {
    this.send({ jsonrpc: '2.0', method, params });
  }

  /** Resolves when the executor has closed the channel and running calls have finished (or the drain time ran out). */
  async finished(): Promise<void> {
    await this.closed;
    if (this.work.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all([...this.work]), new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.drainMs)))]);
      clearTimeout(timer);
      if (this.work.size > 0) this.cancelAll('the executor closed the channel');
    }
    await this.transport.close();
  }

  /** Aborts every running call now (SIGTERM), then closes. */
  async stop(): Promise<void> {
    this.cancelAll('the agent is shutting down');
    await this.transport.close();
  }

  private cancelAll(reason: string): void {
    for (const cancel of this.running.values()) cancel.abort(new ProtocolError(ErrorCode.Cancelled, `Request cancelled: ${reason}`));
  }

  private send(message: unknown): void {
    void this.transport.send(JSON.stringify(message));
  }

  private onFrame(frame: string): void {
    let message: unknown;
    try {
      message = parseJson(frame);
    } catch (err) {
      return this.send(failure(null, toErrorObject(err)));
    }
    const m = classify(message);
    switch (m.kind) {
      case 'invalid':
        return this.send(failure(m.id, { code: ErrorCode.InvalidRequest, message: `Invalid Request: ${m.reason}` }));
      case 'notification':
        if (m.method === CANCELLED && isObject(m.params)) {
          const reason = typeof m.params.reason === 'string' ? m.params.reason : 'cancelled by the executor';
          this.running.get(m.params.requestId as JsonRpcId)?.abort(new ProtocolError(ErrorCode.Cancelled, `Request cancelled: ${reason}`));
        }
        return;
      case 'response':
        return; // the agent sends no requests
      case 'request': {
        const done = this.request(m.id, m.method, m.params);
        this.work.add(done);
        void done.finally(() => this.work.delete(done));
      }
    }
  }

  private async request(id: JsonRpcId, method: string, params: JsonRpcParams | undefined): Promise<void> {
    const cancel = new RequestCancel();
    this.running.set(id, cancel);
    try {
      const result = await this.serve(method, params, id, cancel);
      if (!cancel.aborted) this.send({ jsonrpc: '2.0', id, result });
    } catch (err) {
      // The executor sees only "Internal error": the cause goes to stderr, which it logs.
      if (!(err instanceof ProtocolError)) process.stderr.write(`agent: ${method} failed: ${err instanceof Error ? err.stack : String(err)}\n`);
      if (!cancel.aborted) this.send(failure(id, toErrorObject(err)));
    } finally {
      if (this.running.get(id) === cancel) this.running.delete(id);
    }
  }

  private serve(method: string, params: JsonRpcParams | undefined, id: JsonRpcId, cancel: RequestCancel): Promise<unknown> {
    switch (method) {
      case TOOLS_CALL:
        return this.call(params, id, cancel);
      case PING:
        return Promise.resolve({});
      case BIND_METHOD:
        if (this.options.bind) return this.options.bind();
    }
    return Promise.reject(new ProtocolError(ErrorCode.MethodNotFound, `Method not found: ${method}`));
  }

  private async call(params: JsonRpcParams | undefined, id: JsonRpcId, cancel: RequestCancel): Promise<ToolResult> {
    if (!isObject(params) || typeof params.name !== 'string') throw new ProtocolError(ErrorCode.InvalidParams, 'tools/call needs params.name, a string');
    const { tools, runner } = this.options;
    const tool = tools.get(params.name);
    if (!tool) throw new ProtocolError(ErrorCode.InvalidParams, unknownToolMessage(params.name, tools.keys()));
    const args = params.arguments ?? {};
    if (!isObject(args)) return errorResult(`Invalid arguments for ${tool.name}: (arguments): expected an object`);
    const token = isObject(params._meta) ? params._meta.progressToken : undefined;
    if (typeof token !== 'number' && typeof token !== 'string') return runner.run(tool, args, cancel);
    let progress = 0;
    const relay = latestWins((message: string) => {
      if (this.running.get(id) === cancel && !cancel.aborted) this.notify(PROGRESS, { progressToken: token, progress: ++progress, message });
    }, PROGRESS_GAP_MS);
    try {
      return await runner.run(tool, args, cancel, { onProgress: (line) => relay.push(line) });
    } finally {
      relay.stop(); // nothing for this call after its reply
    }
  }
}
