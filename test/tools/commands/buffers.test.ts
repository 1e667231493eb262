import { HeadTailBuffer } from '../../../shared/tools/commands/head-tail-buffer';
import { OutputBuffer } from '../../../shared/tools/commands/output-buffer';
import { completeUtf8Length, leadingContinuationBytes } from '../../../shared/tools/commands/utf8';

describe('HeadTailBuffer', () => {
  test('keeps the first and last halves of the cap, counts everything, says what was cut', () => {
    const b = new HeadTailBuffer(10);
    for (let i = 0; i < 1000; i++) b.append(Buffer.from('abcdefg'));
    expect(b.total).toBe(7000);
    expect(b.truncated).toBe(true);
    expect(b.cut).toBe(6990);
    // The stream ends "…abcdefg": its last five bytes are "cdefg".
    expect(b.text()).toBe('abcde\n[… 6990 bytes cut …]\ncdefg');
  });

  test('is not truncated at exactly the cap, and keeps the bytes in order', () => {
    const b = new HeadTailBuffer(4);
    b.append(Buffer.from('ab'));
    b.append(Buffer.from('cd'));
    expect([b.text(), b.truncated, b.cut]).toEqual(['abcd', false, 0]);
    b.append(Buffer.from('e'));
    expect([b.text(), b.truncated, b.cut]).toEqual(['ab\n[… 1 bytes cut …]\nde', true, 1]);
  });

  test('a chunk that straddles the head is split between head and tail', () => {
    const b = new HeadTailBuffer(6);
    b.append(Buffer.from('0123456789'));
    expect(b.text()).toBe('012\n[… 4 bytes cut …]\n789');
  });

  test('characters split at either cut are left out and counted as cut', () => {
    const b = new HeadTailBuffer(5); // head 3 bytes, tail 2
    b.append(Buffer.from('ééé')); // 6 bytes: the head ends inside the second é
    expect(b.text()).toBe('é\n[… 2 bytes cut …]\né');
    const c = new HeadTailBuffer(5);
    c.append(Buffer.from('aaaé€')); // tail "\x82\xac" is the end of €
    expect(c.text()).toBe('aaa\n[… 5 bytes cut …]\n');
  });
});

describe('OutputBuffer', () => {
  const str = (r: { offset: number; data: Buffer }) => [r.offset, r.data.toString()];

  test('absolute offsets across chunks', () => {
    const b = new OutputBuffer(100);
    for (const s of ['abc', 'def', 'ghi']) b.append(Buffer.from(s));
    expect(b.end).toBe(9);
    expect(str(b.read(0, 100))).toEqual([0, 'abcdefghi']);
    expect(str(b.read(2, 5))).toEqual([2, 'cdefg']);
    expect(str(b.read(6, 3))).toEqual([6, 'ghi']);
    expect(str(b.read(9, 3))).toEqual([9, '']);
    expect(str(b.read(50, 3))).toEqual([9, '']);
  });

  test('keeps only the latest cap bytes and moves its base', () => {
    const b = new OutputBuffer(5);
    b.append(Buffer.from('abc'));
    b.append(Buffer.from('defg')); // drops "ab"
    expect([b.base, b.end]).toEqual([2, 7]);
    expect(str(b.read(0, 100))).toEqual([2, 'cdefg']);
    b.append(Buffer.from('0123456789')); // one chunk larger than the cap
    expect([b.base, b.end]).toEqual([12, 17]);
    expect(str(b.read(0, 3))).toEqual([12, '567']);
  });
});

describe('utf8 boundaries', () => {
  const e = Buffer.from('é'); // c3 a9
  const euro = Buffer.from('€'); // e2 82 ac
  test('a trailing partial character is left for the next page', () => {
    expect(completeUtf8Length(Buffer.concat([Buffer.from('a'), e.subarray(0, 1)]))).toBe(1);
    expect(completeUtf8Length(Buffer.concat([Buffer.from('a'), euro.subarray(0, 2)]))).toBe(1);
    expect(completeUtf8Length(Buffer.concat([Buffer.from('a'), euro]))).toBe(4);
    expect(completeUtf8Length(Buffer.from('plain'))).toBe(5);
  });
  test('leading continuation bytes are counted', () => {
    expect(leadingContinuationBytes(euro.subarray(1))).toBe(2);
    expect(leadingContinuationBytes(Buffer.from('x'))).toBe(0);
  });
});
