/**
 * The noisy tenant of the `noisy-neighbour` benchmark, in its own process (so its client work is
 * not charged to the quiet tenant's timings in the bench process): `sleepers` callers looping
 * `run_command sleep 0.5` and `spinners` callers looping `list_directory`, each starting its next
 * call as soon as the last is answered (refused or not: a hostile client ignores retryAfterMs).
 * Runs until SIGTERM, then lets its calls finish and prints `served N refused M` on stderr.
 *
 *   node noisy-tenant.js URL TOKEN SLEEPERS SPINNERS
 */
import { Pool } from 'undici';

const [url, token, sleepersArg, spinnersArg] = process.argv.slice(2);
if (!url || !token) throw new Error('usage: noisy-tenant URL TOKEN SLEEPERS SPINNERS');
const sleepers = Number(sleepersArg ?? 24);
const spinners = Number(spinnersArg ?? 2);
const origin = new URL(url);
const pool = new Pool(origin.origin, { connections: sleepers + spinners, pipelining: 1 });
const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
let running = true;
let served = 0;
let refused = 0;

async function post(name: string, args: Record<string, unknown>): Promise<void> {
  const res = await pool.request({
    method: 'POST',
    path: origin.pathname,
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
  });
  const text = await res.body.text();
  if (text.includes('"error"')) refused++;
  else served++;
}

async function loop(name: string, args: Record<string, unknown>): Promise<void> {
  while (running) {
    await post(name, args).catch(() => {
      refused++;
      return new Promise((r) => setTimeout(r, 10));
    });
  }
}

const loops = [
  ...Array.from({ length: sleepers }, () => loop('run_command', { argv: ['sleep', '0.5'] })),
  ...Array.from({ length: spinners }, () => loop('list_directory', { path: '.' })),
];
process.stderr.write('noisy tenant started\n');
process.once('SIGTERM', () => {
  running = false;
  void Promise.all(loops).then(async () => {
    await pool.close();
    process.stderr.write(`served ${served} refused ${refused}\n`);
    process.exit(0);
  });
});
