/**
 * The data directory's JSON stores (executor/json-file.ts): a parse is kept while the file is
 * the same, and never when a change could hide behind the same stamp (inode, size and mtime equal).
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { jsonFile } from '../../executor/json-file';

let dir: string;
beforeEach(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-json-file-'));
});
afterEach(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

const shape = { parse: (v: unknown) => v as { n: number }, empty: () => ({ n: 0 }), serialize: (v: { n: number }) => v };

it('reads an absent file as empty, then what another writer renamed into place', async () => {
  const reader = jsonFile(dir, 'f.json', shape);
  const writer = jsonFile(dir, 'f.json', shape);
  expect(await reader.read()).toEqual({ n: 0 });
  await writer.update((v) => (v.n = 1));
  expect(await reader.read()).toEqual({ n: 1 });
  await writer.update((v) => (v.n = 2));
  expect(await reader.read()).toEqual({ n: 2 });
});

it('keeps the parse of a file that has been still, and re-reads one changed under the same stamp', async () => {
  const file = path.join(dir, 'f.json');
  const reader = jsonFile(dir, 'f.json', shape);
  const old = new Date(Date.now() - 5000);
  await fs.writeFile(file, '{"n":1}');
  await fs.utimes(file, old, old);
  expect(await reader.read()).toEqual({ n: 1 });
  // Still for seconds when read: kept, even if the bytes change under the very same stamp.
  await fs.writeFile(file, '{"n":2}');
  await fs.utimes(file, old, old);
  expect(await reader.read()).toEqual({ n: 1 });
  // Changed just now (as a writer within the same clock tick as a read would leave it): same
  // size, same inode, the mtime forced equal to the one read — read again every time.
  const now = new Date();
  await fs.writeFile(file, '{"n":3}');
  await fs.utimes(file, now, now);
  expect(await reader.read()).toEqual({ n: 3 });
  await fs.writeFile(file, '{"n":4}');
  await fs.utimes(file, now, now);
  expect(await reader.read()).toEqual({ n: 4 });
});

it('updates from one process one at a time, from a fresh parse, leaving no temporary file', async () => {
  const store = jsonFile(dir, 'f.json', shape);
  await Promise.all(Array.from({ length: 20 }, () => store.update((v) => (v.n += 1))));
  expect(await store.read()).toEqual({ n: 20 });
  expect(await fs.readdir(dir)).toEqual(['f.json']);
  expect((await fs.stat(path.join(dir, 'f.json'))).mode & 0o777).toBe(0o600);
});
