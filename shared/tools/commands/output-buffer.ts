/**
 * A process's output as one growing byte sequence of which only the latest `cap` bytes are kept.
 * Offsets are absolute (byte N is always byte N); `base` is the oldest offset still held, so a
 * reader asking below it learns exactly how much was dropped.
 */
export class OutputBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Offset of the first byte held. */
  base = 0;

  constructor(private readonly cap: number) {}

  /** Offset the next byte will get (= every byte ever appended). */
  get end(): number {
    return this.base + this.size;
  }

  append(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.cap) {
      const first = this.chunks[0]!;
      const excess = this.size - this.cap;
      if (first.length <= excess) {
        this.chunks.shift();
        this.size -= first.length;
        this.base += first.length;
      } else {
        // Copy so the dropped head of a large chunk is freed, not just hidden.
        this.chunks[0] = Buffer.from(first.subarray(excess));
        this.size -= excess;
        this.base += excess;
      }
    }
  }

  /** Up to `length` bytes from `offset`, clamped to what is held. */
  read(offset: number, length: number): { offset: number; data: Buffer } {
    const start = Math.min(Math.max(offset, this.base), this.end);
    const stop = Math.min(start + length, this.end);
    const parts: Buffer[] = [];
    let pos = this.base;
    for (const chunk of this.chunks) {
      const chunkEnd = pos + chunk.length;
      if (chunkEnd > start && pos < stop) parts.push(chunk.subarray(Math.max(start - pos, 0), Math.min(stop - pos, chunk.length)));
      if (chunkEnd >= stop) break;
      pos = chunkEnd;
    }
    return { offset: start, data: Buffer.concat(parts, stop - start) };
  }
}
