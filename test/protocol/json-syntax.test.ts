/**
 * findJsonSyntaxError agrees with JSON.parse on what is JSON, and where V8 names a position it
 * names the same one. Checked on hand-picked mistakes and on mutations of valid documents.
 */
import { findJsonSyntaxError } from '../../shared/protocol/json-syntax';

function v8Verdict(text: string): { ok: true } | { ok: false; position?: number } {
  try {
    JSON.parse(text);
    return { ok: true };
  } catch (err) {
    const m = /at position (\d+)/.exec((err as Error).message);
    return m ? { ok: false, position: Number(m[1]) } : { ok: false };
  }
}

function agrees(text: string): void {
  const ours = findJsonSyntaxError(text);
  const v8 = v8Verdict(text);
  if (v8.ok) expect({ text, ours }).toEqual({ text, ours: undefined });
  else {
    expect({ text, found: ours !== undefined }).toEqual({ text, found: true });
    if (v8.position !== undefined) expect({ text, offset: ours!.offset }).toEqual({ text, offset: v8.position });
  }
}

test.each([
  '',
  ' ',
  '{',
  '}',
  '[',
  ']',
  '[1,]',
  '[,1]',
  '{"a":1,}',
  '{,}',
  '{"a" 1}',
  '{"a":}',
  '{"a":1 "b":2}',
  '{a:1}',
  "{'a':1}",
  '"abc',
  '"a\\x"',
  '"\\u12"',
  '"\\u12G4"',
  '"tab\there"',
  'tru',
  'nul',
  'falsey',
  '01',
  '1.',
  '.5',
  '-',
  '1e',
  '+1',
  '1 2',
  '{"a":[1,2}',
  '[{"a":1]',
  '{"a":1}}',
  '[]]',
  '\ufeff{}',
  'NaN',
  'Infinity',
  '"\\/"',
  '{"a":{"b":[true,false,null,-0.5e+3]}}',
  '[1,2,3]\n',
  '\n\n  {"a":\n  tru}',
  '{"jsonrpc":"2.0","id":1,"method":"ping",}',
])('%j', (text) => agrees(text));

test('line and column count from 1 and follow newlines', () => {
  expect(findJsonSyntaxError('{\n  "a": 1,\n  "b" 2\n}')).toMatchObject({ line: 3, column: 7, offset: 18 });
});

test('mutations of valid documents: the same verdict as JSON.parse', () => {
  const docs = [
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'write_file', arguments: { path: 'a b/c.txt', content: 'x\n"y"\\z\u00e9' } } },
    [1, -2.5, 3e10, true, false, null, 'str', { nested: [[], {}] }],
  ].map((d) => JSON.stringify(d, null, 1));
  const inserts = ['{', '}', '[', ']', ',', ':', '"', '\\', 'x', ' ', '\n', '0', '-', '.', 'e'];
  let seed = 42;
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  for (const doc of docs) {
    for (let k = 0; k < 400; k++) {
      const at = random(doc.length + 1);
      const mutated = random(2) === 0 ? doc.slice(0, at) + inserts[random(inserts.length)]! + doc.slice(at) : doc.slice(0, at) + doc.slice(at + 1);
      agrees(mutated);
    }
  }
});

test('hostile nesting does not exhaust the stack', () => {
  expect(findJsonSyntaxError('['.repeat(200_000))).toMatchObject({ offset: 200_000 });
});
