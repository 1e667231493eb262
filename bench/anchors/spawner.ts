/**
 * The bare-spawn anchor for `sandboxes`: a small Node process that, for each line it reads,
 * spawns the program named in it (`["/bin/echo","hi"]`), waits for it to exit and answers with
 * its output. It runs apart from the bench because fork(2) costs grow with the parent's resident
 * memory (49 MiB: 0.9 ms, 249 MiB: 14 ms here): spawning from the bench, which holds clients,
 * BullMQ and samples, would make the anchor slower than a real minimal spawner.
 *
 *   node spawner.js      (one JSON argv per line in, one JSON {code, out} per line out)
 */
import { spawn } from 'node:child_process';

let buffered = '';
process.stdin.setEncoding('utf8').on('data', (chunk: string) => {
  buffered += chunk;
  let nl: number;
  while ((nl = buffered.indexOf('\n')) !== -1) {
    const argv = JSON.parse(buffered.slice(0, nl)) as string[];
    buffered = buffered.slice(nl + 1);
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (t: string) => (out += t));
    child.once('close', (code) => process.stdout.write(`${JSON.stringify({ code, out })}\n`));
  }
});
