/**
 * Everything the documentation sends a reader to is in the repository: every relative link
 * (and its #anchor) resolves, every repository path written in backticks exists, nothing points
 * outside the checkout (../shared, DESIGN §…, a machine's absolute paths), and every compose
 * `exec` whose output is captured with $(…) has -T.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';

const REPO = path.resolve(__dirname, '../..');
const DOCS = [
  'README.md',
  'CONTRIBUTING.md',
  ...readdirSync(path.join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
  'bench/README.md',
  'shared/tools/files/README.md',
  'infra/build-ca/README.md',
].filter((f) => existsSync(path.join(REPO, f)));

const read = (file: string) => readFileSync(path.join(REPO, file), 'utf8');
/** GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
const anchorsOf = (file: string) => new Set([...read(file).matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1]!)));

/** Text outside fenced code blocks (where paths are examples, not references). */
const prose = (text: string) => text.replace(/```[\s\S]*?```/g, '');

test.each(DOCS)('%s: every relative link and anchor resolves', (file) => {
  const broken: string[] = [];
  for (const m of prose(read(file)).matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!;
    if (/^[a-z]+:/.test(target)) continue;
    const [rel, anchor] = target.split('#') as [string, string | undefined];
    const resolved = rel === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), rel));
    if (!existsSync(path.join(REPO, resolved))) broken.push(`${target} (no ${resolved})`);
    else if (anchor && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor)) broken.push(`${target} (no heading #${anchor})`);
  }
  expect(broken).toEqual([]);
});

test.each(DOCS)('%s: every repository path in backticks exists', (file) => {
  const TOP =
    /^(?:\.\/)?((?:docs|scripts|infra|shared|gateway|executor|bin|test|bench|\.ci)\/[\w.@/-]*|Dockerfile|docker-compose\.yml|\.env\.example|package\.json|tsconfig(?:\.\w+)?\.json|CONTRIBUTING\.md|README\.md)$/;
  const missing: string[] = [];
  for (const m of prose(read(file)).matchAll(/`([^`\s]+)`/g)) {
    const candidate = m[1]!.replace(/[.,:;]$/, '');
    if (!TOP.test(candidate) || /[*<>]/.test(candidate)) continue;
    if (!existsSync(path.join(REPO, candidate))) missing.push(candidate);
  }
  expect(missing).toEqual([]);
});

test.each(DOCS)('%s: nothing outside the repository', (file) => {
  const text = read(file);
  expect(text).not.toMatch(/\.\.\/shared\//);
  expect(text).not.toMatch(/DESIGN §/);
  expect(text).not.toMatch(/\/work\//);
});

test.each(DOCS)('%s: a captured compose exec has -T', (file) => {
  const bad = [...read(file).matchAll(/\$\((docker-compose|docker compose) exec (?!-T)[^)]*\)/g)].map((m) => m[0]);
  expect(bad).toEqual([]);
});

test('the checks look at something: README links and paths are found', () => {
  expect(prose(read('README.md')).match(/\]\((docs\/[^)]+)\)/g)?.length).toBeGreaterThan(3);
});
