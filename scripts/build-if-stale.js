#!/usr/bin/env node
// `npm start`'s prestart: compiles dist/ only when a source is newer than its output (or has none),
// or a tsconfig changed since the oldest output. A full `tsc` takes 10-40 s here, this check tens
// of milliseconds; `tsc --incremental` was measured at 3.6 s of CPU for a build with nothing to do.
// Every output is rewritten by each (non-incremental) build, so "newer than its source" holds
// exactly for what the last build compiled. Deleted sources leave their old output, as tsc does.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const OUT = path.join(ROOT, 'dist');
const CONFIGS = ['tsconfig.json', 'tsconfig.build.json'];

function* sources(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(file);
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) yield file;
  }
}

const mtime = (file) => {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return undefined;
  }
};

/** The outputs whose source is newer (or which are missing), and why the first one is stale. */
function staleOutputs() {
  const { include } = JSON.parse(fs.readFileSync(path.join(ROOT, 'tsconfig.build.json'), 'utf8'));
  const stale = [];
  let reason;
  let oldest = Infinity;
  for (const dir of include) {
    for (const source of sources(path.join(ROOT, dir))) {
      const output = path.join(OUT, path.relative(ROOT, source)).replace(/\.ts$/, '.js');
      const built = mtime(output);
      if (built === undefined || built < mtime(source)) {
        stale.push(output);
        reason ??= `${path.relative(ROOT, source)} ${built === undefined ? 'has no output' : 'changed'}`;
      } else oldest = Math.min(oldest, built);
    }
  }
  const config = CONFIGS.find((name) => mtime(path.join(ROOT, name)) > oldest);
  if (config) reason ??= `${config} changed`;
  return { stale, reason };
}

const { stale, reason } = staleOutputs();
if (reason === undefined) process.exit(0);
process.stderr.write(`build: dist/ is out of date (${reason}); compiling\n`);
const tsc = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
if (tsc.status !== 0) {
  // tsc emits despite type errors: mark what was stale so the next start compiles (and fails) again.
  for (const output of stale) if (mtime(output) !== undefined) fs.utimesSync(output, 0, 0);
  process.exit(tsc.status ?? 1);
}
