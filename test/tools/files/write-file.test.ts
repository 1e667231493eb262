import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { Harness, makeHarness } from './harness';

describe('write_file', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness({ maxWriteBytes: 100 });
  });
  afterEach(() => h.close());

  const leftovers = async (dir = h.root) => (await fs.readdir(dir)).filter((n) => n.includes('toolgate'));

  it('creates a file and its parent directories', async () => {
    expect(await h.ok('write_file', { path: 'a/b/c.txt', content: 'hi' })).toEqual({ path: 'a/b/c.txt', bytesWritten: 2, mode: 'overwrite', created: true });
    expect(await h.read('a/b/c.txt')).toBe('hi');
  });

  it('overwrites atomically, keeps permission bits, leaves no temp file', async () => {
    const file = await h.put('run.sh', 'old');
    await fs.chmod(file, 0o750);
    const inode = (await fs.stat(file)).ino;
    expect(await h.ok('write_file', { path: 'run.sh', content: 'new' })).toMatchObject({ created: false });
    const st = await fs.stat(file);
    expect(await h.read('run.sh')).toBe('new');
    expect(st.mode & 0o777).toBe(0o750);
    expect(st.ino).not.toBe(inode); // replaced by rename, not written in place
    expect(await leftovers()).toEqual([]);
  });

  it('mode create refuses an existing file and creates a new one', async () => {
    await h.put('x.txt', 'keep');
    expect(await h.fail('write_file', { path: 'x.txt', content: 'no', mode: 'create' })).toMatch(/Already exists: x.txt/);
    expect(await h.read('x.txt')).toBe('keep');
    await h.ok('write_file', { path: 'y.txt', content: 'new', mode: 'create' });
    expect(await h.read('y.txt')).toBe('new');
    expect(await leftovers()).toEqual([]);
  });

  it('mode append adds to the end, creating the file if needed', async () => {
    await h.ok('write_file', { path: 'log.txt', content: 'one\n', mode: 'append' });
    await h.ok('write_file', { path: 'log.txt', content: 'two\n', mode: 'append' });
    expect(await h.read('log.txt')).toBe('one\ntwo\n');
  });

  it('append refuses a file with other hard links, overwrite replaces only this name', async () => {
    const other = path.join(h.base, 'other.txt');
    await fs.writeFile(other, 'outside');
    await fs.link(other, path.join(h.root, 'hard.txt'));
    expect(await h.fail('write_file', { path: 'hard.txt', content: 'x', mode: 'append' })).toMatch(/hard links/);
    await h.ok('write_file', { path: 'hard.txt', content: 'x' });
    expect(await fs.readFile(other, 'utf8')).toBe('outside');
    expect(await h.read('hard.txt')).toBe('x');
  });

  it('writes base64 content and refuses invalid base64', async () => {
    await h.ok('write_file', { path: 'b.bin', content: 'AAEC/w==', encoding: 'base64' });
    expect([...(await fs.readFile(path.join(h.root, 'b.bin')))]).toEqual([0, 1, 2, 255]);
    expect(await h.fail('write_file', { path: 'c.bin', content: 'not base64!', encoding: 'base64' })).toMatch(/not valid base64/);
  });

  it('says what it did in words a model reads plainly', async () => {
    const text = async (args: Record<string, unknown>) => ((await h.call('write_file', args)).content[0] as { text: string }).text;
    expect(await text({ path: 'n.txt', content: 'hello' })).toBe('Created n.txt (5 bytes)');
    expect(await text({ path: 'n.txt', content: 'hello!' })).toBe('Wrote 6 bytes to n.txt');
    expect(await text({ path: 'n.txt', content: '!', mode: 'append' })).toBe('Appended 1 byte to n.txt');
  });

  it('refuses content over the write limit before touching anything, and says how to write it in parts', async () => {
    const refusal = await h.fail('write_file', { path: 'big.txt', content: 'x'.repeat(101) });
    expect(refusal).toMatch(/write limit of 100 bytes \(TOOLGATE_MAX_WRITE_BYTES\)/);
    expect(refusal).toMatch(/in parts of at most 100 bytes: the first with mode "overwrite" \(or "create"\), each next one with mode "append"/);
    expect(await h.fail('write_file', { path: 'big.bin', content: Buffer.alloc(101).toString('base64'), encoding: 'base64' })).toMatch(/write limit/);
    expect(await fs.readdir(h.root)).toEqual([]);
  });

  it('refuses to write over a directory or the root', async () => {
    await fs.mkdir(path.join(h.root, 'd'));
    expect(await h.fail('write_file', { path: 'd', content: 'x' })).toMatch(/Is a directory: d/);
    expect(await h.fail('write_file', { path: '.', content: 'x' })).toMatch(/workspace root/);
  });

  it('writes through a symlink that stays inside to its target', async () => {
    await h.put('real.txt', 'old');
    await fs.symlink('real.txt', path.join(h.root, 'alias'));
    await h.ok('write_file', { path: 'alias', content: 'new' });
    expect(await h.read('real.txt')).toBe('new');
    expect((await fs.lstat(path.join(h.root, 'alias'))).isSymbolicLink()).toBe(true);
  });
});

describe('edit_file', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness();
  });
  afterEach(() => h.close());

  it('applies exact edits in order and returns a unified diff', async () => {
    await h.put('f.ts', 'const a = 1;\nconst b = 2;\n');
    const r = await h.ok('edit_file', {
      path: 'f.ts',
      edits: [
        { oldText: 'a = 1', newText: 'a = 10' },
        { oldText: 'a = 10;\nconst b', newText: 'a = 10;\nlet b' },
      ],
    });
    expect(await h.read('f.ts')).toBe('const a = 10;\nlet b = 2;\n');
    expect(r).toMatchObject({ replacements: 2, dryRun: false, changed: true, diffTruncated: false });
    expect(r.diff).toContain('--- f.ts');
    expect(r.diff).toContain('-const a = 1;');
    expect(r.diff).toContain('+let b = 2;');
  });

  it('dryRun shows the diff and writes nothing', async () => {
    await h.put('f.txt', 'hello');
    const r = await h.ok('edit_file', { path: 'f.txt', edits: [{ oldText: 'hello', newText: 'bye' }], dryRun: true });
    expect(r.diff).toContain('+bye');
    expect(await h.read('f.txt')).toBe('hello');
  });

  it('requires exactly one match unless replaceAll, and changes nothing on failure', async () => {
    await h.put('f.txt', 'x\ny\nx\n');
    expect(await h.fail('edit_file', { path: 'f.txt', edits: [{ oldText: 'x', newText: 'z' }] })).toMatch(/occurs 2 times in f.txt \(lines 1, 3\)/);
    expect(
      await h.fail('edit_file', {
        path: 'f.txt',
        edits: [
          { oldText: 'y', newText: 'Y' },
          { oldText: 'nope', newText: '' },
        ],
      }),
    ).toMatch(/edit 2 of 2, oldText was not found in f.txt/);
    expect(await h.read('f.txt')).toBe('x\ny\nx\n');
    await h.ok('edit_file', { path: 'f.txt', edits: [{ oldText: 'x', newText: 'z', replaceAll: true }] });
    expect(await h.read('f.txt')).toBe('z\ny\nz\n');
  });

  it('keeps $ patterns in newText literal and hints at whitespace mismatches', async () => {
    await h.put('f.txt', 'price\n  indented line\n');
    await h.ok('edit_file', { path: 'f.txt', edits: [{ oldText: 'price', newText: "$& $1 $$'" }] });
    expect(await h.read('f.txt')).toBe("$& $1 $$'\n  indented line\n");
    expect(await h.fail('edit_file', { path: 'f.txt', edits: [{ oldText: 'indented   line', newText: 'x' }] })).toMatch(/whitespace/);
  });

  it('matches LF oldText in a CRLF file and keeps CRLF', async () => {
    await h.put('w.txt', 'one\r\ntwo\r\nthree\r\n');
    await h.ok('edit_file', { path: 'w.txt', edits: [{ oldText: 'one\ntwo', newText: 'uno\ndos' }] });
    expect(await h.read('w.txt')).toBe('uno\r\ndos\r\nthree\r\n');
  });

  it('refuses binary files, missing files and empty oldText', async () => {
    await h.put('b.bin', Buffer.from([0, 1, 2]));
    expect(await h.fail('edit_file', { path: 'b.bin', edits: [{ oldText: 'a', newText: 'b' }] })).toMatch(/not UTF-8 text/);
    expect(await h.fail('edit_file', { path: 'no.txt', edits: [{ oldText: 'a', newText: 'b' }] })).toMatch(/No such file or directory: no.txt/);
    await h.put('e.txt', 'abc');
    expect(await h.fail('edit_file', { path: 'e.txt', edits: [{ oldText: '', newText: 'b' }] })).toMatch(/oldText is empty/);
  });

  it('keeps permission bits', async () => {
    const f = await h.put('s.sh', 'echo a');
    await fs.chmod(f, 0o755);
    await h.ok('edit_file', { path: 's.sh', edits: [{ oldText: 'a', newText: 'b' }] });
    expect((await fs.stat(f)).mode & 0o777).toBe(0o755);
  });
});
