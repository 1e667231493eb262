/**
 * Keeps the first and the last bytes of a stream (half of `cap` each) and counts the rest, so a
 * command with endless output is drained (it never blocks on a full pipe) while memory stays
 * bounded, and the end of a long log (where a build says what failed) survives beside its start.
 */
import { OutputBuffer } from './output-buffer';
import { completeUtf8Length, leadingContinuationBytes } from './utf8';

export class HeadTailBuffer {
  private readonly head: Buffer[] = [];
  private headKept = 0;
  private readonly headCap: number;
  /** The bytes after the head, of which only the latest `cap - headCap` stay. */
  private readonly tail: OutputBuffer;
  /** Every byte the stream produced, kept or not. */
  total = 0;

  constructor(cap: number) {
    this.headCap = Math.ceil(cap / 2);
    this.tail = new OutputBuffer(cap - this.headCap);
  }

  append(chunk: Buffer): void {
    this.total += chunk.length;
    const room = this.headCap - this.headKept;
    if (room >= chunk.length) {
      this.head.push(chunk);
      this.headKept += chunk.length;
      return;
    }
    if (room > 0) {
      // Copy the head's part so the rest of the chunk's allocation can be freed.
      this.head.push(Buffer.from(chunk.subarray(0, room)));
      this.headKept += room;
    }
    this.tail.append(room > 0 ? chunk.subarray(room) : chunk);
  }

  /** Bytes between the head and the tail were dropped. */
  get truncated(): boolean {
    return this.tail.base > 0;
  }

  /**
   * The kept bytes as UTF-8. When the middle was dropped: the head, a line saying how many bytes
   * were cut, and the tail; a character split at either cut is left out rather than mangled (and
   * counted as cut).
   */
  text(): string {
    const { head, tail, cut } = this.parts();
    return cut === 0 ? head + tail : `${head}\n[… ${cut} bytes cut …]\n${tail}`;
  }

  /** Bytes of the stream that text() leaves out (0 when nothing was dropped). */
  get cut(): number {
    return this.parts().cut;
  }

  private parts(): { head: string; tail: string; cut: number } {
    const head = Buffer.concat(this.head, this.headKept);
    const tail = this.tail.read(this.tail.base, this.tail.end - this.tail.base).data;
    if (!this.truncated) return { head: '', tail: Buffer.concat([head, tail]).toString('utf8'), cut: 0 };
    const headEnd = completeUtf8Length(head);
    const tailStart = leadingContinuationBytes(tail);
    const cut = this.total - headEnd - (tail.length - tailStart);
    return { head: head.toString('utf8', 0, headEnd), tail: tail.toString('utf8', tailStart), cut };
  }
}
