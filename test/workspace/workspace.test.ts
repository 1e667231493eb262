import { closeSync, constants, promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ToolError } from '../../shared/protocol/errors';
import { Workspace } from '../../shared/workspace/workspace';

let base: string;
let root: string;
let ws: Workspace;

beforeEach(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'tg-ws-')));
  root = path.join(base, 'root');
  await fs.mkdir(root);
  await fs.mkdir(path.join(base, 'root_evil'));
  await fs.writeFile(path.join(base, 'root_evil', 'secret'), 'S');
  ws = await Workspace.open(root, 256);
});
afterEach(() => fs.rm(base, { recursive: true, force: true }));

const refused = async (p: Promise<unknown>, re: RegExp) => {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  expect((err as Error).message).toMatch(re);
  expect((err as Error).message).not.toContain(base); // the host path never appears
};

describe('Workspace.open', () => {
  it('resolves the root through symlinks and refuses a missing root or a file', async () => {
    await fs.symlink(root, path.join(base, 'alias'));
    expect((await Workspace.open(path.join(base, 'alias'))).root).toBe(root);
    await expect(Workspace.open(path.join(base, 'missing'))).rejects.toThrow(/does not exist/);
    await fs.writeFile(path.join(base, 'file'), '');
    await expect(Workspace.open(path.join(base, 'file'))).rejects.toThrow(/not a directory/);
  });
});

describe('lexical checks', () => {
  it('accepts relative and absolute-inside paths', () => {
    expect(ws.lexical('a/b')).toBe(path.join(root, 'a/b'));
    expect(ws.lexical(path.join(root, 'a'))).toBe(path.join(root, 'a'));
    expect(ws.lexical('a/../b')).toBe(path.join(root, 'b'));
    expect(ws.display(root)).toBe('.');
  });

  it('refuses .., outside absolute paths, the prefix sibling, NUL, empty and over-long paths', () => {
    expect(() => ws.lexical('../x')).toThrow(/outside the workspace/);
    expect(() => ws.lexical('a/../../x')).toThrow(/outside the workspace/);
    expect(() => ws.lexical('/etc/passwd')).toThrow(/outside the workspace/);
    expect(() => ws.lexical(`${root}_evil/secret`)).toThrow(/outside the workspace/);
    expect(() => ws.lexical('../root_evil/secret')).toThrow(/outside the workspace/);
    expect(() => ws.lexical('a\0b')).toThrow(/NUL/);
    expect(() => ws.lexical('')).toThrow(/non-empty/);
    expect(() => ws.lexical('x'.repeat(257))).toThrow(/longer than 256 bytes/);
    expect(ws.contains(`${root}_evil`)).toBe(false);
  });
});

describe('resolve', () => {
  it('follows symlinks that stay inside and allows missing tails', async () => {
    await fs.mkdir(path.join(root, 'real'));
    await fs.symlink('real', path.join(root, 'link'));
    expect(await ws.resolve('link/new/file')).toBe(path.join(root, 'real/new/file'));
  });

  it('refuses symlinks, dangling symlinks and chains that lead outside', async () => {
    await fs.symlink(path.join(base, 'root_evil'), path.join(root, 'out'));
    await fs.symlink(path.join(base, 'nowhere/file'), path.join(root, 'dangling'));
    await fs.symlink('dangling', path.join(root, 'chain'));
    await fs.symlink('out/../root_evil/x', path.join(root, 'tricky'));
    await refused(ws.resolve('out/secret'), /leads outside/);
    await refused(ws.resolve('dangling'), /leads outside/);
    await refused(ws.resolve('chain/deeper'), /leads outside/);
    await refused(ws.resolve('tricky'), /leads outside/);
  });

  it('refuses symlink loops with a clear message', async () => {
    await fs.symlink('b', path.join(root, 'a'));
    await fs.symlink('a', path.join(root, 'b'));
    await refused(ws.resolve('a'), /symbolic link/);
  });
});

describe('opening what was checked', () => {
  it('openRead gives a descriptor of the file inside', async () => {
    await fs.writeFile(path.join(root, 'f'), 'inside');
    const { fd, shown } = await ws.openRead('f');
    expect(shown).toBe('f');
    expect(readFileSync(fd, 'utf8')).toBe('inside');
    closeSync(fd);
  });

  it('openParent pins the parent and names the last component without following it', async () => {
    await fs.symlink(path.join(base, 'root_evil', 'secret'), path.join(root, 'link'));
    const { dir, name, shown } = await ws.openParent('link', { followLast: false });
    expect([name, shown]).toEqual(['link', 'link']);
    expect(dir.lstat(name).isSymbolicLink()).toBe(true);
    // Opening the name never follows the link out.
    const code = (() => {
      try {
        dir.openFile(name, constants.O_RDONLY);
        return 'opened';
      } catch (err) {
        return (err as NodeJS.ErrnoException).code;
      }
    })();
    expect(code).toBe('ELOOP');
    dir.close();
    await refused(ws.openParent('link', { followLast: true }), /leads outside/);
    await refused(ws.openParent('.', { followLast: false }), /workspace root/);
  });

  it('openDir creates missing directories inside pinned parents and refuses a symlinked component', async () => {
    (await ws.openDir('a/b/c', { create: true })).close();
    expect((await fs.stat(path.join(root, 'a/b/c'))).isDirectory()).toBe(true);
    await fs.symlink(path.join(base, 'root_evil'), path.join(root, 'evil'));
    await refused(ws.openDir('evil/new', { create: true }), /leads outside/);
    await expect(fs.stat(path.join(base, 'root_evil', 'new'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
