/** The files every benchmark reads: a 1 KiB text file and a directory of 100 entries. */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export const FILE_1K = 'file-1k.txt';
export const DIR_100 = 'dir-100';

export interface Fixture {
  /** Real path (symlinks resolved: the reference server compares resolved paths). */
  root: string;
  remove(): Promise<void>;
}

export async function makeFixture(prefix = 'toolgate-bench-'): Promise<Fixture> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), prefix)));
  await populate(root);
  return { root, remove: () => fs.rm(root, { recursive: true, force: true }) };
}

/** Writes the files into an existing directory (a tenant workspace, say). */
export async function populate(root: string): Promise<void> {
  const line = 'The quick brown fox jumps over the lazy dog. 0123456789 abcdefghij\n'; // 68 bytes
  await fs.writeFile(path.join(root, FILE_1K), line.repeat(16).slice(0, 1024));
  await fs.mkdir(path.join(root, DIR_100), { recursive: true });
  for (let i = 0; i < 100; i++) {
    const name = `entry-${String(i).padStart(3, '0')}`;
    if (i % 10 === 0) await fs.mkdir(path.join(root, DIR_100, name), { recursive: true });
    else await fs.writeFile(path.join(root, DIR_100, `${name}.txt`), `entry ${i}\n`);
  }
}

/** Hands the tree to the sandbox uid (bwrap runs the agent as 65534 and needs a writable workspace). */
export async function chownTree(root: string, uid: number): Promise<void> {
  await fs.chown(root, uid, uid);
  for (const entry of await fs.readdir(root, { withFileTypes: true })) {
    const p = path.join(root, entry.name);
    if (entry.isDirectory()) await chownTree(p, uid);
    else await fs.lchown(p, uid, uid);
  }
}
