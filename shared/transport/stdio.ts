/**
 * Newline-delimited JSON over a pair of streams (stdin/stdout by default). A line longer than
 * `maxFrameBytes` is discarded as it streams in, never buffered whole, and reported through
 * `onerror` so the server can answer it.
 */
import type { Readable, Writable } from 'node:stream';
import { FrameTooLargeError, Transport } from './transport';

const NEWLINE = 0x0a;
const DONE: Promise<void> = Promise.resolve();

export class StdioTransport implements Transport {
  onmessage?: (frame: string) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;

  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private discarding = false;
  private closed = false;
  /** Resolves when the output drains; set while a write is held back. */
  private drained: Promise<void> | undefined;

  constructor(
    private readonly input: Readable = process.stdin,
    private readonly output: Writable = process.stdout,
    private readonly maxFrameBytes = 16 * 1024 * 1024,
  ) {}

  async start(): Promise<void> {
    this.input.on('data', this.onData);
    this.input.on('end', this.onEnd);
    this.input.on('error', this.onStreamError);
    this.output.on('error', this.onStreamError);
  }

  send(frame: string): Promise<void> {
    if (this.closed) return DONE;
    // One write per frame keeps frames whole even when replies finish out of order. No callback
    // per frame: a frame the stream takes at once (the usual case) costs no closure, no promise
    // and no afterWrite tick; only under backpressure does the sender wait, for the drain.
    if (this.output.write(frame + '\n') || this.output.destroyed) return DONE;
    return (this.drained ??= this.untilDrained());
  }

  /** One wait shared by every sender held back, so backpressure adds one listener, not one per frame. */
  private untilDrained(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.output.off('drain', done);
        this.output.off('close', done);
        this.output.off('error', done);
        this.drained = undefined;
        resolve();
      };
      this.output.on('drain', done);
      this.output.on('close', done);
      this.output.on('error', done);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.input.off('data', this.onData);
    this.input.off('end', this.onEnd);
    this.input.pause();
    this.onclose?.();
  }

  private readonly onData = (chunk: Buffer | string): void => {
    let buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    let nl: number;
    while ((nl = buf.indexOf(NEWLINE)) !== -1) {
      const head = buf.subarray(0, nl);
      buf = buf.subarray(nl + 1);
      if (this.discarding) {
        this.discarding = false;
        continue;
      }
      if (this.pendingBytes + head.length > this.maxFrameBytes) {
        this.reset();
        this.onerror?.(new FrameTooLargeError(this.maxFrameBytes));
        continue;
      }
      const line = this.pending.length === 0 ? head : Buffer.concat([...this.pending, head]);
      this.reset();
      this.deliver(line);
    }
    if (buf.length === 0 || this.discarding) return;
    if (this.pendingBytes + buf.length > this.maxFrameBytes) {
      // Too long already: drop it as it arrives and answer once its newline comes.
      this.reset();
      this.discarding = true;
      this.onerror?.(new FrameTooLargeError(this.maxFrameBytes));
      return;
    }
    this.pending.push(Buffer.from(buf)); // copy: the stream may reuse its chunk
    this.pendingBytes += buf.length;
  };

  private deliver(line: Buffer): void {
    let end = line.length;
    if (end > 0 && line[end - 1] === 0x0d) end--; // tolerate CRLF
    if (end === 0) return;
    this.onmessage?.(line.toString('utf8', 0, end));
  }

  private reset(): void {
    this.pending = [];
    this.pendingBytes = 0;
  }

  private readonly onEnd = (): void => {
    // A final line without a newline is still a frame.
    if (!this.discarding && this.pending.length > 0) {
      const line = Buffer.concat(this.pending);
      this.reset();
      this.deliver(line);
    }
    // The peer stopped writing; replies to what it sent may still go out until close().
    this.onclose?.();
  };

  private readonly onStreamError = (err: Error): void => {
    this.onerror?.(err);
    void this.close();
  };
}
