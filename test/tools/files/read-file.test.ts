import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { Harness, makeHarness, textOf } from './harness';

const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201ffa5d5b20000000049454e44ae426082',
  'hex',
);

describe('read_file', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness({ maxReadBytes: 64 });
  });
  afterEach(() => h.close());

  it('returns the file text itself as the first content block', async () => {
    await h.put('a.txt', 'héllo\n');
    const r = await h.call('read_file', { path: 'a.txt' });
    expect(r.content).toEqual([{ type: 'text', text: 'héllo\n' }]);
    expect(r.structuredContent).toEqual({ path: 'a.txt', content: 'héllo\n', encoding: 'utf8', size: 7, offset: 0, bytesRead: 7, truncated: false });
  });

  it('accepts an absolute path inside the root and shows the caller-relative path', async () => {
    await h.put('d/b.txt', 'x');
    expect((await h.ok('read_file', { path: path.join(h.root, 'd/b.txt') })).path).toBe('d/b.txt');
  });

  it('cuts at the read limit with truncated and nextOffset, never inside a character', async () => {
    await h.put('big.txt', 'a'.repeat(63) + 'é' + 'z'.repeat(50));
    const r = await h.ok('read_file', { path: 'big.txt' });
    expect(r).toMatchObject({ truncated: true, bytesRead: 63, nextOffset: 63, size: 115 });
    expect(r.content).toBe('a'.repeat(63));
    const rest = await h.ok('read_file', { path: 'big.txt', offset: r.nextOffset });
    expect(rest.content).toBe('é' + 'z'.repeat(50));
    expect(rest).toMatchObject({ truncated: false, offset: 63 });
    expect(rest.nextOffset).toBeUndefined();
  });

  it('tells a model reading only text that the content is partial', async () => {
    await h.put('big.txt', 'x'.repeat(100));
    const r = await h.call('read_file', { path: 'big.txt' });
    expect(r.content[0]).toEqual({ type: 'text', text: 'x'.repeat(64) });
    expect(textOf(r)).toMatch(/cut at the read limit; continue with offset=64/);
  });

  it('reads a byte range with offset and length', async () => {
    await h.put('r.txt', '0123456789');
    const r = await h.ok('read_file', { path: 'r.txt', offset: 2, length: 3 });
    expect(r).toMatchObject({ content: '234', offset: 2, bytesRead: 3, truncated: false, nextOffset: 5 });
    expect((await h.ok('read_file', { path: 'r.txt', offset: 50 })).content).toBe('');
  });

  it('returns the first or last lines with head and tail', async () => {
    await h.put('l.txt', 'one\ntwo\nthree\nfour\n');
    expect((await h.ok('read_file', { path: 'l.txt', head: 2 })).content).toBe('one\ntwo\n');
    expect((await h.ok('read_file', { path: 'l.txt', tail: 2 })).content).toBe('three\nfour\n');
    expect((await h.ok('read_file', { path: 'l.txt', tail: 10 })).content).toBe('one\ntwo\nthree\nfour\n');
    await h.put('n.txt', 'a\nb\nc');
    expect((await h.ok('read_file', { path: 'n.txt', tail: 1 })).content).toBe('c');
    expect((await h.ok('read_file', { path: 'n.txt', head: 5 })).content).toBe('a\nb\nc');
  });

  it('tail reads only the last window of a large file and says when lines were cut', async () => {
    await h.put('t.txt', 'x'.repeat(200) + '\nlast\n');
    const r = await h.ok('read_file', { path: 't.txt', tail: 5 });
    expect(r.truncated).toBe(true);
    expect(r.content.endsWith('\nlast\n')).toBe(true);
    expect(r.bytesRead).toBeLessThanOrEqual(64);
  });

  it('refuses conflicting options with a clear message', async () => {
    await h.put('a.txt', 'x');
    expect(await h.fail('read_file', { path: 'a.txt', head: 1, tail: 1 })).toMatch(/head or tail, not both/);
    expect(await h.fail('read_file', { path: 'a.txt', head: 1, offset: 1 })).toMatch(/cannot be combined with offset/);
    expect(await h.fail('read_file', { path: 'a.txt', tail: 1, encoding: 'base64' })).toMatch(/base64/);
    expect(await h.fail('read_file', { path: 'a.txt', offset: -1 })).toMatch(/offset/);
  });

  it('returns binary files as base64 and honours an explicit encoding', async () => {
    await h.put('bin', Buffer.from([0, 1, 2, 255]));
    expect(await h.ok('read_file', { path: 'bin' })).toMatchObject({ encoding: 'base64', content: 'AAEC/w==' });
    await h.put('t.txt', 'hi');
    expect(await h.ok('read_file', { path: 't.txt', encoding: 'base64' })).toMatchObject({ encoding: 'base64', content: 'aGk=' });
  });

  it('returns a whole image as MCP image content, recognised by its bytes', async () => {
    await h.close();
    h = await makeHarness();
    await h.put('pic.dat', PNG);
    const r = await h.call('read_file', { path: 'pic.dat' });
    expect(r.content[0]).toEqual({ type: 'image', data: PNG.toString('base64'), mimeType: 'image/png' });
    expect(r.structuredContent).toMatchObject({ encoding: 'base64', mimeType: 'image/png', content: PNG.toString('base64') });
    const asText = await h.call('read_file', { path: 'pic.dat', encoding: 'utf8' });
    expect(asText.content[0]!.type).toBe('text');
    // Part of an image is not an image: it comes back as base64 text.
    const part = await h.call('read_file', { path: 'pic.dat', length: 10 });
    expect(part.content[0]!.type).toBe('text');
    expect(part.structuredContent).toMatchObject({ encoding: 'base64', bytesRead: 10 });
  });

  it('names the caller path in errors and refuses directories and FIFOs', async () => {
    expect(await h.fail('read_file', { path: 'missing.txt' })).toBe('No such file or directory: missing.txt');
    await fs.mkdir(path.join(h.root, 'dir'));
    expect(await h.fail('read_file', { path: 'dir' })).toMatch(/^Is a directory: dir/);
    const { execFileSync } = await import('node:child_process');
    execFileSync('mkfifo', [path.join(h.root, 'fifo')]);
    expect(await h.fail('read_file', { path: 'fifo' })).toMatch(/Not a regular file: fifo/);
  });

  it('follows a symlink that stays inside', async () => {
    await h.put('target.txt', 'inside');
    await fs.symlink('target.txt', path.join(h.root, 'link'));
    expect((await h.ok('read_file', { path: 'link' })).content).toBe('inside');
  });
});

describe('read_multiple_files', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await makeHarness({ maxReadBytes: 10, maxMultipleFiles: 3 });
  });
  afterEach(() => h.close());

  it('reads each file; one failure does not fail the rest', async () => {
    await h.put('a.txt', 'aaa');
    await h.put('b.txt', 'bbb');
    const r = await h.call('read_multiple_files', { paths: ['a.txt', 'nope.txt', 'b.txt'] });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent!.files).toEqual([
      expect.objectContaining({ path: 'a.txt', content: 'aaa' }),
      { path: 'nope.txt', error: 'No such file or directory: nope.txt' },
      expect.objectContaining({ path: 'b.txt', content: 'bbb' }),
    ]);
    expect(textOf(r)).toMatch(/--- a.txt ---\naaa/);
  });

  it('shares the byte limit across files, in order', async () => {
    await h.put('a.txt', 'aaaaaaaa');
    await h.put('b.txt', 'bbbbbbbb');
    const s = await h.ok('read_multiple_files', { paths: ['a.txt', 'b.txt'] });
    expect(s.files.map((f: { content: string }) => f.content)).toEqual(['aaaaaaaa', 'bb']);
    expect(s.truncated).toBe(true);
  });

  it('refuses more paths than the limit', async () => {
    expect(await h.fail('read_multiple_files', { paths: ['a', 'b', 'c', 'd'] })).toMatch(/at most 3/);
  });
});
