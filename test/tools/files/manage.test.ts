import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { Harness, makeHarness } from './harness';

let h: Harness;
beforeEach(async () => {
  h = await makeHarness();
});
afterEach(() => h.close());
const exists = (rel: string) =>
  fs.lstat(path.join(h.root, rel)).then(
    () => true,
    () => false,
  );

describe('create_directory', () => {
  it('creates missing parents and is idempotent', async () => {
    expect(await h.ok('create_directory', { path: 'a/b/c' })).toEqual({ path: 'a/b/c', created: true });
    expect(await h.ok('create_directory', { path: 'a/b/c' })).toEqual({ path: 'a/b/c', created: false });
    expect((await fs.stat(path.join(h.root, 'a/b/c'))).isDirectory()).toBe(true);
  });

  it('refuses when a component is a file', async () => {
    await h.put('f', 'x');
    expect(await h.fail('create_directory', { path: 'f/sub' })).toMatch(/Not a directory/);
    expect(await h.fail('create_directory', { path: 'f' })).toMatch(/Not a directory/);
  });
});

describe('move_path', () => {
  it('renames a file, creating the destination parents', async () => {
    await h.put('a.txt', 'A');
    expect(await h.ok('move_path', { source: 'a.txt', destination: 'x/y/b.txt' })).toEqual({ source: 'a.txt', destination: 'x/y/b.txt' });
    expect(await h.read('x/y/b.txt')).toBe('A');
    expect(await exists('a.txt')).toBe(false);
  });

  it('refuses an existing destination unless overwrite', async () => {
    await h.put('a.txt', 'A');
    await h.put('b.txt', 'B');
    expect(await h.fail('move_path', { source: 'a.txt', destination: 'b.txt' })).toMatch(/Destination already exists: b.txt/);
    await h.ok('move_path', { source: 'a.txt', destination: 'b.txt', overwrite: true });
    expect(await h.read('b.txt')).toBe('A');
  });

  it('moves a symlink as a link and refuses the root and a missing source', async () => {
    await h.put('t.txt', 'T');
    await fs.symlink('t.txt', path.join(h.root, 'l'));
    await h.ok('move_path', { source: 'l', destination: 'l2' });
    expect(await fs.readlink(path.join(h.root, 'l2'))).toBe('t.txt');
    expect(await h.fail('move_path', { source: '.', destination: 'x' })).toMatch(/workspace root/);
    expect(await h.fail('move_path', { source: 'nope', destination: 'x' })).toMatch(/No such file or directory: nope/);
    await fs.mkdir(path.join(h.root, 'd'));
    expect(await h.fail('move_path', { source: 'd', destination: 'd/inner' })).toMatch(/Invalid operation/);
  });
});

describe('delete_path', () => {
  it('deletes a file and an empty directory', async () => {
    await h.put('a.txt', 'A');
    expect(await h.ok('delete_path', { path: 'a.txt' })).toEqual({ path: 'a.txt', type: 'file', removed: 1 });
    await fs.mkdir(path.join(h.root, 'e'));
    expect(await h.ok('delete_path', { path: 'e' })).toEqual({ path: 'e', type: 'directory', removed: 1 });
  });

  it('needs recursive for a non-empty directory, then removes the whole tree', async () => {
    await h.put('d/a.txt', 'A');
    await h.put('d/s/b.txt', 'B');
    expect(await h.fail('delete_path', { path: 'd' })).toMatch(/Directory not empty: d; pass recursive/);
    expect(await h.ok('delete_path', { path: 'd', recursive: true })).toEqual({ path: 'd', type: 'directory', removed: 4 });
    expect(await exists('d')).toBe(false);
  });

  it('removes a symlink to a directory as a link, leaving the target', async () => {
    await h.put('keep/x.txt', 'X');
    await fs.symlink('keep', path.join(h.root, 'l'));
    expect(await h.ok('delete_path', { path: 'l', recursive: true })).toMatchObject({ type: 'symlink', removed: 1 });
    expect(await h.read('keep/x.txt')).toBe('X');
  });

  it('refuses the root, however it is spelled', async () => {
    for (const p of ['.', '/', h.root, 'a/..', './']) {
      const msg = await h.fail('delete_path', { path: p === '/' ? h.root + '/' : p, recursive: true });
      expect(msg).toMatch(/workspace root/);
    }
  });
});

describe('get_file_info', () => {
  it('describes files, directories, symlinks and the root', async () => {
    const f = await h.put('a.txt', 'hello');
    await fs.chmod(f, 0o640);
    const info = await h.ok('get_file_info', { path: 'a.txt' });
    expect(info).toMatchObject({ path: 'a.txt', type: 'file', size: 5, permissions: 'rw-r-----', mode: '640', links: 1 });
    expect(new Date(info.modified).getTime()).toBeGreaterThan(0);
    await fs.symlink('a.txt', path.join(h.root, 'l'));
    expect(await h.ok('get_file_info', { path: 'l' })).toMatchObject({ type: 'symlink', symlinkTarget: 'a.txt' });
    expect(await h.ok('get_file_info', { path: '.' })).toMatchObject({ path: '.', type: 'directory' });
    expect(await h.fail('get_file_info', { path: 'missing' })).toBe('No such file or directory: missing');
  });
});
