import { HeadBuffer } from '../../../shared/tools/commands/head-buffer';
import { OutputBuffer } from '../../../shared/tools/commands/output-buffer';
import { completeUtf8Length, leadingContinuationBytes } from '../../../shared/tools/commands/utf8';

describe('HeadBuffer', () => {
  test('keeps the first cap bytes, counts everything, never holds more', () => {
    const b = new HeadBuffer(10);
    for (let i = 0; i < 1000; i++) b.append(Buffer.from('abcdefg'));
    expect(b.text()).toBe('abcdefgabc');
    expect(b.total).toBe(7000);
    expect(b.truncated).toBe(true);
  });

  test('is not truncated at exactly the cap', () => {
    const b = new HeadBuffer(4);
    b.append(Buffer.from('ab'));
    b.append(Buffer.from('cd'));
    expect([b.text(), b.truncated]).toEqual(['abcd', false]);
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
