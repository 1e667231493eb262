/**
 * A small JSON file in the data directory that the executor reads on its hot paths and that
 * `toolgate` commands rewrite whole: the egress policies (read per connection) and the secret
 * store (read per command and per intercepted connection) of an executor without Redis.
 *
 * Reading and parsing the whole file each time cost 0.3 ms with one tenant and 3.8 ms with a
 * thousand, so the parse is kept while the file is the same one: same inode (each write here
 * renames a new file into place, from this process or another), size and mtime (an edit in place
 * shows by its mtime) — and only once the file had been still for a while when it was read, so
 * two changes within one clock tick cannot hide behind one stamp (git's "racy" rule). A read is
 * one stat; reads asked at once share it.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { writeAtomically } from './write-atomically';

export interface JsonFile<T> {
  readonly path: string;
  /** The parsed file (`empty()` when there is none). Shared between readers: never change it. */
  read(): Promise<T>;
  /**
   * Applies `change` to a fresh parse of its own and writes the result whole (mode 0600, a
   * temporary file renamed into place). Updates from this process run one at a time; two
   * processes writing at the same instant may lose one update (the last rename wins).
   */
  update<R>(change: (all: T) => R): Promise<R>;
}

export interface JsonFileShape<T> {
  /** From the file's JSON value; throws on a shape it cannot take. */
  parse(value: unknown): T;
  empty(): T;
  /** The JSON value to write. */
  serialize(all: T): unknown;
}

/** How long a file must have been still before a parse of it is kept (clock ticks are 1–10 ms). */
const RACY_MS = 100;

export function jsonFile<T>(dir: string, name: string, shape: JsonFileShape<T>): JsonFile<T> {
  const file = path.join(dir, name);
  let kept: { stamp: string; value: T; trusted: boolean } | undefined;
  let reading: Promise<T> | undefined;
  let writing: Promise<unknown> = Promise.resolve();

  const absentAsEmpty = (err: unknown): T => {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return shape.empty();
    throw err;
  };
  const parseFile = async (): Promise<T> => shape.parse(JSON.parse(await fs.readFile(file, 'utf8')));
  const readKept = async (): Promise<T> => {
    try {
      const st = await fs.stat(file, { bigint: true });
      const stamp = `${st.ino}:${st.size}:${st.mtimeNs}`;
      if (kept?.stamp === stamp && kept.trusted) return kept.value;
      const readAt = Date.now();
      const value = await parseFile();
      // A file changed within a clock tick of our read may change again under the same stamp
      // (mtime has a tick's grain, sizes repeat, a rename may reuse the inode before last): such a
      // parse is used once and read again next time, until the file has been still for a while.
      kept = { stamp, value, trusted: Number(st.mtimeNs / 1_000_000n) < readAt - RACY_MS };
      return value;
    } catch (err) {
      return absentAsEmpty(err);
    }
  };

  return {
    path: file,
    read() {
      reading ??= readKept().finally(() => (reading = undefined));
      return reading;
    },
    update(change) {
      const next = writing.then(async () => {
        const all = await parseFile().catch(absentAsEmpty);
        const result = change(all);
        await fs.mkdir(dir, { recursive: true });
        await writeAtomically(file, JSON.stringify(shape.serialize(all), null, 2) + '\n', 0o600);
        kept = undefined;
        return result;
      });
      writing = next.catch(() => undefined);
      return next;
    },
  };
}
