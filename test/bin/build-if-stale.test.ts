/**
 * `npm start` compiles only when dist/ is out of date (scripts/build-if-stale.js, its prestart).
 * The script runs in a scratch project whose `typescript/bin/tsc` is a stand-in that logs each
 * call and writes one output per source, so every case is decided in milliseconds.
 */
import { spawnSync } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const REPO = path.resolve(__dirname, '../..');
const FAKE_TSC = `
const fs = require('node:fs'), path = require('node:path');
fs.appendFileSync('tsc.log', 'run\\n');
for (const f of fs.readdirSync('src')) {
  fs.mkdirSync('dist/src', { recursive: true });
  fs.writeFileSync(path.join('dist/src', f.replace(/\\.ts$/, '.js')), '');
}
process.exit(Number(process.env.FAKE_TSC_STATUS ?? 0));
`;

let dir: string;
beforeEach(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-stale-'));
  await fs.mkdir(path.join(dir, 'scripts'));
  await fs.copyFile(path.join(REPO, 'scripts/build-if-stale.js'), path.join(dir, 'scripts/build-if-stale.js'));
  await fs.mkdir(path.join(dir, 'node_modules/typescript/bin'), { recursive: true });
  await fs.writeFile(path.join(dir, 'node_modules/typescript/bin/tsc'), FAKE_TSC);
  await fs.writeFile(path.join(dir, 'tsconfig.json'), '{}');
  await fs.writeFile(path.join(dir, 'tsconfig.build.json'), JSON.stringify({ include: ['src'] }));
  await fs.mkdir(path.join(dir, 'src'));
  for (const name of ['a.ts', 'b.ts', 'types.d.ts']) await fs.writeFile(path.join(dir, 'src', name), '');
  // Inputs a minute old; an edit below moves one to 30 s ago: after the last build, before now.
  for (const file of ['tsconfig.json', 'tsconfig.build.json', 'src/a.ts', 'src/b.ts', 'src/types.d.ts']) await age(file, 60);
});
afterEach(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

/** Runs the script; returns its status, its stderr and how many times it ran tsc. */
function check(env: Record<string, string> = {}) {
  const before = tscRuns();
  const r = spawnSync(process.execPath, [path.join(dir, 'scripts/build-if-stale.js')], { cwd: os.tmpdir(), encoding: 'utf8', env: { ...process.env, ...env } });
  return { status: r.status, stderr: r.stderr, compiled: tscRuns() - before };
}
function tscRuns(): number {
  try {
    return readFileSync(path.join(dir, 'tsc.log'), 'utf8').split('\n').filter(Boolean).length;
  } catch {
    return 0;
  }
}
/** Sets a file's times to `seconds` ago. */
const age = (file: string, seconds: number) => fs.utimes(path.join(dir, file), new Date(Date.now() - seconds * 1000), new Date(Date.now() - seconds * 1000));
/** An edit made after the last build: the outputs are moved back first, so the order is certain. */
async function edit(file: string) {
  for (const out of await fs.readdir(path.join(dir, 'dist/src'))) await age(`dist/src/${out}`, 45);
  await age(file, 30);
}

test('npm start runs the check, not a full build', () => {
  const pkg = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  expect(pkg.scripts.prestart).toBe('node scripts/build-if-stale.js');
});

test('no dist/: compiles; then, with nothing changed, does not', () => {
  expect(check()).toMatchObject({ status: 0, compiled: 1, stderr: expect.stringMatching(/src\/a\.ts has no output/) });
  expect(check()).toEqual({ status: 0, compiled: 0, stderr: '' });
});

test('a source newer than its output compiles again', async () => {
  check();
  await edit('src/b.ts');
  expect(check()).toMatchObject({ status: 0, compiled: 1, stderr: expect.stringMatching(/src\/b\.ts changed/) });
  expect(check().compiled).toBe(0);
});

test('a new source, or a changed tsconfig, compiles again', async () => {
  check();
  await fs.writeFile(path.join(dir, 'src/c.ts'), '');
  await age('src/c.ts', 60); // older than every output: only its missing output makes it stale
  expect(check().compiled).toBe(1);
  await edit('tsconfig.build.json');
  expect(check()).toMatchObject({ compiled: 1, stderr: expect.stringMatching(/tsconfig\.build\.json changed/) });
});

test('a failed build fails the start, and the next start compiles again', async () => {
  check();
  await edit('src/a.ts');
  expect(check({ FAKE_TSC_STATUS: '2' })).toMatchObject({ status: 2, compiled: 1 });
  expect(check()).toMatchObject({ status: 0, compiled: 1 });
  expect(check().compiled).toBe(0);
});
