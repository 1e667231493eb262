/**
 * Parses the agent's large frames off the executor's event loop. The executor serves every
 * tenant from one event loop, and JSON.parse of a frame of tens of MiB holds it for tens to
 * hundreds of milliseconds (much longer for a frame of millions of tiny values), so a frame over
 * `INLINE_PARSE_BYTES` goes to one worker thread shared by the executor's sandboxes. The worker
 * first counts the frame's values with a scan that allocates nothing and refuses a frame with more
 * than `maxValues` (so `[{},{},…]` never becomes millions of objects, here or there), then parses
 * it; the main thread only receives the structured clone of a value already bounded in bytes and
 * values. Small frames (the common case: most replies are a few KiB) are parsed inline, where a
 * thread hop would cost more than the parse.
 */
import { Worker } from 'node:worker_threads';

/** Frames up to this size are parsed on the event loop: at most ~0.3 ms, and at most 64 Ki values. */
export const INLINE_PARSE_BYTES = 64 * 1024;

/** A frame the parser refused: not JSON, or too many values. */
export class FrameRefused extends Error {
  override readonly name = 'FrameRefused';
}

/**
 * The worker's whole program (plain JS, so it runs the same from dist/ and under ts-jest). The
 * count walks the text once: each value starts a new count at `[`, `{`, `,` (outside strings) or
 * at the first character; it over-counts nothing a parse would create.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
function countValues(text, max) {
  let n = 1, inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++;            // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123 || c === 44) { if (++n > max) return n; }
  }
  return n;
}
parentPort.on('message', ({ id, text, maxValues }) => {
  if (countValues(text, maxValues) > maxValues) {
    parentPort.postMessage({ id, error: 'it holds more than ' + maxValues + ' values' });
    return;
  }
  let value;
  try { value = JSON.parse(text); } catch { parentPort.postMessage({ id, error: 'it is not valid JSON' }); return; }
  parentPort.postMessage({ id, value });
});
`;

interface Job {
  resolve(value: unknown): void;
  reject(err: Error): void;
}

/** Memory the worker may use: a parse of the largest allowed frame fits; a runaway does not take the executor. */
const WORKER_HEAP_MB = 512;

class ParserThread {
  private worker: Worker | undefined;
  private readonly jobs = new Map<number, Job>();
  private nextId = 1;

  parse(text: string, maxValues: number): Promise<unknown> {
    const worker = this.ensure();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.jobs.set(id, { resolve, reject });
      if (this.jobs.size === 1) worker.ref();
      worker.postMessage({ id, text, maxValues });
    });
  }

  private ensure(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_SOURCE, { eval: true, resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB } });
    worker.unref(); // an idle parser never keeps the process alive
    worker.on('message', (m: { id: number; value?: unknown; error?: string }) => {
      const job = this.jobs.get(m.id);
      if (!job) return;
      this.jobs.delete(m.id);
      if (this.jobs.size === 0) worker.unref();
      if (m.error !== undefined) job.reject(new FrameRefused(m.error));
      else job.resolve(m.value);
    });
    const lost = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      const jobs = [...this.jobs.values()];
      this.jobs.clear();
      for (const job of jobs) job.reject(new FrameRefused(why));
    };
    worker.on('error', (err) => lost(`the parser failed on it (${err.message})`));
    worker.on('exit', () => lost('the parser stopped while reading it'));
    this.worker = worker;
    return worker;
  }
}

let shared: ParserThread | undefined;

/**
 * Parses one frame: inline when small, else on the shared worker. Rejects with FrameRefused
 * when the frame is not JSON or holds more than `maxValues` values.
 */
export function parseFrame(text: string, maxValues: number): Promise<unknown> {
  if (text.length <= INLINE_PARSE_BYTES) {
    try {
      return Promise.resolve(JSON.parse(text));
    } catch {
      return Promise.reject(new FrameRefused('it is not valid JSON'));
    }
  }
  shared ??= new ParserThread();
  return shared.parse(text, maxValues);
}
