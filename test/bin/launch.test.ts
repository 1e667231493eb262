/**
 * `toolgate serve` is launched with the V8 heap flags of bin/node-flags.ts wherever the project
 * launches it — the service image's CMD, the gateway service of docker-compose.yml, `npm start`
 * (docs/deployment.md, "Memory") — and `serve` started that way runs with them. The executor
 * keeps V8's defaults (it has CPU targets and no memory one).
 */
import { spawn } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SERVE_NODE_FLAGS } from '../../bin/node-flags';
import { freePort } from '../helpers/ports';

const REPO = path.resolve(__dirname, '../..');
const BIN = path.join(REPO, 'dist/bin/toolgate.js');
const read = (file: string) => readFileSync(path.join(REPO, file), 'utf8');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('the list is the young generation at 2 × 4 MiB and a major GC at 20 % old-generation growth', () => {
  expect(SERVE_NODE_FLAGS).toEqual(['--max-semi-space-size=4', '--heap-growing-percent=20']);
});

test('the service image, the compose gateway and npm start run serve with exactly those flags; the compose executor without', () => {
  const exec = JSON.stringify(['node', ...SERVE_NODE_FLAGS, '/app/dist/bin/toolgate.js', 'serve']).replace(/,/g, ', ');
  const cmd = read('Dockerfile')
    .split('\n')
    .filter((l) => l.startsWith('CMD '));
  expect(cmd).toEqual([`CMD ${exec}`]);

  const compose = read('docker-compose.yml');
  const service = (name: string) => {
    const start = compose.indexOf(`\n  ${name}:\n`);
    expect(start).toBeGreaterThan(-1);
    const rest = compose.slice(start + 1);
    const end = rest.slice(1).search(/\n {2}[a-z-]+:\n/);
    return end === -1 ? rest : rest.slice(0, end + 1);
  };
  expect(service('gateway')).toContain(`    command: ${exec}\n`);
  expect(service('executor')).toContain('    command: ["toolgate", "executor"]\n');

  const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
  expect(pkg.scripts.start).toBe(`exec node ${SERVE_NODE_FLAGS.join(' ')} dist/bin/toolgate.js serve`);
});

test('serve started with them runs and answers (V8 accepts both flags on the command line)', async () => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-launch-'));
  const port = await freePort();
  const child = spawn(process.execPath, [...SERVE_NODE_FLAGS, BIN, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      TOOLGATE_PORT: String(port),
      TOOLGATE_DATA_DIR: dataDir,
      TOOLGATE_SANDBOX: 'none',
      TOOLGATE_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`serve exited: ${err}`);
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      await sleep(50);
    }
    // node rejects an unknown or misspelt V8 flag with a message on stderr.
    expect(err).not.toMatch(/bad option|unknown flag|Error/i);
  } finally {
    child.kill('SIGTERM');
    await exited;
    await fs.rm(dataDir, { recursive: true, force: true });
  }
});
