import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { Harness, makeHarness, textOf } from './harness';

let h: Harness;
afterEach(() => h.close());

async function project(): Promise<void> {
  await h.put('README.md', '# Title\nhello world\n');
  await h.put('src/index.ts', 'export const Hello = 1;\n// hello again\n');
  await h.put('src/lib/util.ts', 'export function hello() {}\n');
  await h.put('src/lib/util.test.ts', 'hello test\n');
  await h.put('node_modules/pkg/index.js', 'hello from deps\n');
  await h.put('.git/config', 'hello git\n');
  await h.put('bin.dat', Buffer.from([0x68, 0x65, 0x6c, 0x6c, 0x6f, 0]));
  await fs.symlink('src', path.join(h.root, 'link-src'));
}

describe('list_directory', () => {
  beforeEach(async () => {
    h = await makeHarness({ maxListEntries: 3 });
  });

  it('lists entries sorted with their type, and no stat unless details are asked for', async () => {
    await h.put('b.txt', 'bb');
    await fs.mkdir(path.join(h.root, 'a'));
    await fs.symlink('b.txt', path.join(h.root, 'c'));
    const r = await h.call('list_directory', {});
    expect(r.structuredContent).toEqual({
      path: '.',
      entries: [
        { name: 'a', type: 'directory' },
        { name: 'b.txt', type: 'file' },
        { name: 'c', type: 'symlink' },
      ],
      total: 3,
      truncated: false,
    });
    expect(textOf(r)).toBe('[DIR] a\n[FILE] b.txt\n[LINK] c');
  });

  it('with details: true, adds file sizes and modification times (of the link, not its target)', async () => {
    await h.put('b.txt', 'bb');
    await fs.mkdir(path.join(h.root, 'a'));
    await fs.symlink('b.txt', path.join(h.root, 'c'));
    const when = new Date('2020-01-02T03:04:05.000Z');
    await fs.utimes(path.join(h.root, 'b.txt'), when, when);
    await fs.lutimes(path.join(h.root, 'c'), new Date('2021-01-01T00:00:00.000Z'), new Date('2021-01-01T00:00:00.000Z'));
    const r = await h.call('list_directory', { details: true });
    const dirTime = (await fs.lstat(path.join(h.root, 'a'))).mtime.toISOString();
    expect(r.structuredContent).toEqual({
      path: '.',
      entries: [
        { name: 'a', type: 'directory', modified: dirTime },
        { name: 'b.txt', type: 'file', size: 2, modified: '2020-01-02T03:04:05.000Z' },
        { name: 'c', type: 'symlink', modified: '2021-01-01T00:00:00.000Z' },
      ],
      total: 3,
      truncated: false,
    });
    expect(textOf(r)).toBe(
      `[DIR] a (modified ${dirTime})\n[FILE] b.txt (2 bytes, modified 2020-01-02T03:04:05.000Z)\n[LINK] c (modified 2021-01-01T00:00:00.000Z)`,
    );
  });

  it('refuses a details flag that is not a boolean', async () => {
    expect(await h.fail('list_directory', { details: 'yes' })).toMatch(/details/);
  });

  it('caps entries with truncated', async () => {
    for (const n of ['1', '2', '3', '4', '5']) await h.put(`d/${n}`, n);
    const s = await h.ok('list_directory', { path: 'd' });
    expect(s.entries.map((e: { name: string }) => e.name)).toEqual(['1', '2', '3']);
    expect(s).toMatchObject({ total: 5, truncated: true });
  });

  it('refuses a file and a missing path', async () => {
    await h.put('f', 'x');
    expect(await h.fail('list_directory', { path: 'f' })).toMatch(/Not a directory/);
    expect(await h.fail('list_directory', { path: 'nope' })).toMatch(/No such file or directory: nope/);
  });
});

describe('directory_tree', () => {
  it('returns a nested tree, skips excluded subtrees, does not follow symlinks', async () => {
    h = await makeHarness();
    await project();
    const s = await h.ok('directory_tree', { excludePatterns: ['node_modules', '.git', '*.dat'] });
    expect(s.tree).toEqual([
      { name: 'README.md', type: 'file' },
      { name: 'link-src', type: 'symlink' },
      {
        name: 'src',
        type: 'directory',
        children: [
          { name: 'index.ts', type: 'file' },
          {
            name: 'lib',
            type: 'directory',
            children: [
              { name: 'util.test.ts', type: 'file' },
              { name: 'util.ts', type: 'file' },
            ],
          },
        ],
      },
    ]);
    expect(s).toMatchObject({ entries: 7, truncated: false, depthLimited: false });
  });

  it('honours maxDepth and the entry cap', async () => {
    h = await makeHarness({ maxTreeEntries: 4, maxTreeDepth: 5 });
    await project();
    const shallow = await h.ok('directory_tree', { path: 'src', maxDepth: 1 });
    expect(shallow.tree).toEqual([
      { name: 'index.ts', type: 'file' },
      { name: 'lib', type: 'directory' },
    ]);
    expect(shallow.depthLimited).toBe(true);
    const capped = await h.ok('directory_tree', {});
    expect(capped).toMatchObject({ entries: 4, truncated: true });
  });
});

describe('search_files', () => {
  beforeEach(async () => {
    h = await makeHarness();
    await project();
  });

  it('matches name globs at any depth and path globs from the directory', async () => {
    const s = await h.ok('search_files', { pattern: '*.ts', excludePatterns: ['node_modules'] });
    expect(s.matches.map((m: { path: string }) => m.path)).toEqual(['src/index.ts', 'src/lib/util.test.ts', 'src/lib/util.ts']);
    const p = await h.ok('search_files', { path: 'src', pattern: 'lib/*.test.ts' });
    expect(p.matches).toEqual([{ path: 'src/lib/util.test.ts', type: 'file' }]);
    const dirs = await h.ok('search_files', { pattern: 'LIB', caseSensitive: false });
    expect(dirs.matches).toEqual([{ path: 'src/lib', type: 'directory' }]);
  });

  it('caps results with truncated', async () => {
    const s = await h.ok('search_files', { pattern: '*', maxResults: 2 });
    expect(s.matches).toHaveLength(2);
    expect(s.truncated).toBe(true);
  });
});

describe('search_text', () => {
  beforeEach(async () => {
    h = await makeHarness({ maxSearchFileBytes: 1000 });
    await project();
  });

  it('finds lines, case-insensitive by default, skipping binary files and not following symlinks', async () => {
    const r = await h.call('search_text', { query: 'hello', excludePatterns: ['node_modules', '.git'] });
    const s = r.structuredContent!;
    expect((s.matches as Array<{ path: string; line: number }>).map((m) => `${m.path}:${m.line}`)).toEqual([
      'README.md:2',
      'src/index.ts:1',
      'src/index.ts:2',
      'src/lib/util.test.ts:1',
      'src/lib/util.ts:1',
    ]);
    expect(s.filesSkipped).toBe(1); // bin.dat
    expect(textOf(r)).toContain('src/index.ts:1:14: export const Hello = 1;');
  });

  it('is case-sensitive when the query has an uppercase letter or when asked', async () => {
    const smart = await h.ok('search_text', { path: 'src', query: 'Hello' });
    expect(smart.matches).toEqual([{ path: 'src/index.ts', line: 1, column: 14, text: 'export const Hello = 1;' }]);
    const insensitive = await h.ok('search_text', { path: 'src', query: 'Hello', caseSensitive: false });
    expect(insensitive.matches).toHaveLength(4);
  });

  it('supports regular expressions, include globs and maxResults', async () => {
    const re = await h.ok('search_text', { query: '^export (const|function)', regex: true, include: '*.ts' });
    expect(re.matches.map((m: { path: string }) => m.path)).toEqual(['src/index.ts', 'src/lib/util.ts']);
    const lit = await h.ok('search_text', { query: '(const', include: ['*.ts'] });
    expect(lit.matches).toEqual([]);
    const capped = await h.ok('search_text', { query: 'hello', maxResults: 2 });
    expect(capped.matches).toHaveLength(2);
    expect(capped.truncated).toBe(true);
    expect(await h.fail('search_text', { query: '(', regex: true })).toMatch(/Invalid regular expression/);
  });

  it('skips files over the size limit', async () => {
    await h.put('huge.txt', 'hello\n'.repeat(500));
    const s = await h.ok('search_text', { query: 'hello', include: 'huge.txt' });
    expect(s).toMatchObject({ matches: [], filesSkipped: 1, filesSearched: 0 });
  });

  it('stops a catastrophic regular expression at the time limit', async () => {
    await h.close();
    h = await makeHarness({ searchTimeoutMs: 300 });
    await h.put('evil.txt', 'a'.repeat(40) + 'b\n');
    const started = Date.now();
    const s = await h.ok('search_text', { query: '(a+)+$', regex: true });
    expect(s).toMatchObject({ matches: [], truncated: true });
    expect(Date.now() - started).toBeLessThan(20_000); // would otherwise run for a very long time
  });
});
