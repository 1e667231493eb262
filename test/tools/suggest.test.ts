import { closestNames, didYouMean, editDistance } from '../../shared/tools/suggest';
import { ALL_TOOLS } from '../../shared/tools/index';

const TOOLS = ALL_TOOLS.map((t) => t.name);

test('edit distance counts a swap of neighbours as one edit', () => {
  expect(editDistance('content', 'contents')).toBe(1);
  expect(editDistance('raed_file', 'read_file')).toBe(1);
  expect(editDistance('', 'abc')).toBe(3);
  expect(editDistance('same', 'same')).toBe(0);
});

test.each([
  ['reed_file', 'read_file'],
  ['read_files', 'read_file'],
  ['writefile', 'write_file'],
  ['run', 'run_command'],
  ['list_dir', 'list_directory'],
  ['http', 'http_request'],
  ['kill', 'kill_process'],
])('%s → %s first', (typo, meant) => {
  expect(closestNames(typo, TOOLS)[0]).toBe(meant);
});

test('nothing close, nothing suggested; at most three', () => {
  expect(closestNames('zzzzqqqq', TOOLS)).toEqual([]);
  expect(closestNames('file', TOOLS).length).toBeLessThanOrEqual(3);
  expect(didYouMean('zzzz', TOOLS)).toBe('');
  expect(didYouMean('contents', ['path', 'content', 'encoding', 'mode'], (s) => `\`${s}\``)).toBe(' Did you mean `content`?');
});
