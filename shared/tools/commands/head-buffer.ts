/**
 * Keeps the first `cap` bytes of a stream and counts the rest, so a command with endless output
 * is drained (it never blocks on a full pipe) while memory stays bounded.
 */
import { completeUtf8Length } from './utf8';

export class HeadBuffer {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  /** Every byte the stream produced, kept or not. */
  total = 0;

  constructor(private readonly cap: number) {}

  append(chunk: Buffer): void {
    this.total += chunk.length;
    const room = this.cap - this.kept;
    if (room <= 0) return;
    // Copy a partial chunk so the rest of its allocation can be freed.
    const part = chunk.length <= room ? chunk : Buffer.from(chunk.subarray(0, room));
    this.chunks.push(part);
    this.kept += part.length;
  }

  get truncated(): boolean {
    return this.total > this.kept;
  }

  /** The kept bytes as UTF-8; a character split by the cap is left out rather than mangled. */
  text(): string {
    const all = Buffer.concat(this.chunks, this.kept);
    return all.toString('utf8', 0, this.truncated ? completeUtf8Length(all) : all.length);
  }
}
