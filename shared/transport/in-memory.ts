/** Two linked transports in one process: what one sends, the other receives. For tests. */
import type { Transport } from './transport';

export class InMemoryTransport implements Transport {
  onmessage?: (frame: string) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  private peer?: InMemoryTransport;
  private closed = false;
  private started = false;
  private queue: string[] = [];

  static pair(): [InMemoryTransport, InMemoryTransport] {
    const a = new InMemoryTransport();
    const b = new InMemoryTransport();
    a.peer = b;
    b.peer = a;
    return [a, b];
  }

  async start(): Promise<void> {
    this.started = true;
    const queued = this.queue;
    this.queue = [];
    for (const frame of queued) this.onmessage?.(frame);
  }

  async send(frame: string): Promise<void> {
    if (this.closed) throw new Error('transport is closed');
    const peer = this.peer!;
    queueMicrotask(() => peer.receive(frame));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
    await this.peer?.close();
  }

  private receive(frame: string): void {
    if (this.closed) return;
    if (!this.started) this.queue.push(frame);
    else this.onmessage?.(frame);
  }
}
