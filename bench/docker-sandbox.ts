/**
 * The docker sandbox backend, side by side with its anchors in one run (the README's Performance targets):
 *
 *   warm   run_command `echo hi` through the backend (JSON-RPC over the attached stdio)
 *          vs `docker exec C echo hi` (CLI) and a dockerode exec (hijacked, demultiplexed)
 *          into a running container of the same image, and the none backend (the agent alone);
 *   cold   dockerBackend().start() until the agent answers, vs dockerode create + start of the
 *          same image with the same hardening; plus where the cold start's time goes.
 *
 * Sides alternate call by call so load on the machine hits them alike. Not part of `npm test`.
 *
 *   npm run build && npm run sandbox:image      (a Docker engine running; docs/deployment.md)
 *   npx tsc --outDir dist/bench-docker --rootDir . --module commonjs --target es2022 --esModuleInterop \
 *       --strict --skipLibCheck --types node bench/docker-sandbox.ts executor/agent/main.ts \
 *     && node dist/bench-docker/bench/docker-sandbox.js [--quick]
 */
import Docker from 'dockerode';
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { PassThrough } from 'node:stream';
import type { Sandbox } from '../executor/sandbox/backend';
import { dockerBackend } from '../executor/sandbox/docker/backend';
import { noneBackend } from '../executor/sandbox/none';
import { DEFAULT_LIMITS } from '../shared/limits';

const IMAGE = process.env.TOOLGATE_SANDBOX_IMAGE?.trim() || 'toolgate-sandbox:local';
const QUICK = process.argv.includes('--quick');
const NEVER = new AbortController().signal;
const HARDENED = {
  NetworkMode: 'none',
  ReadonlyRootfs: true,
  CapDrop: ['ALL'],
  SecurityOpt: ['no-new-privileges'],
  IpcMode: 'none',
  Init: true,
  PidsLimit: 128,
  Memory: 256 << 20,
  MemorySwap: 256 << 20,
  NanoCpus: 1e9,
  LogConfig: { Type: 'none', Config: {} },
  Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=64m,mode=1777' },
};
const LABELS = { 'toolgate.bench': '1' };

/** `settleMs`: an untimed pause after each call, for anchors whose after-work (dockerd reaping an exec) would land on the next side's clock. */
type Side = { label: string; call: () => Promise<unknown>; settleMs?: number };

/** Runs the sides in turn, call by call, and returns each side's sorted latencies (ms). */
async function alternate(sides: Side[], calls: number, warmup: number): Promise<number[][]> {
  for (let i = 0; i < warmup; i++) for (const s of sides) await s.call();
  const times = sides.map(() => [] as number[]);
  for (let i = 0; i < calls; i++) {
    // A fresh random order each round, so no side always follows the same neighbour's after-effects.
    const order = sides.map((_, k) => k).sort(() => Math.random() - 0.5);
    for (const k of order) {
      const s = sides[k]!;
      const t0 = performance.now();
      await s.call();
      times[k]!.push(performance.now() - t0);
      if (s.settleMs) await new Promise((r) => setTimeout(r, s.settleMs));
    }
  }
  return times.map((t) => t.sort((a, b) => a - b));
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
const fmt = (ms: number) => (ms < 10 ? ms.toFixed(2) : ms.toFixed(1)).padStart(7);

function table(title: string, sides: Side[], times: number[][], ours = 0): void {
  process.stdout.write(`\n${title}\n${'side'.padEnd(58)}     p50     p90  ratio(p50 ours/this)\n`);
  for (const [k, s] of sides.entries()) {
    const ratio = k === ours ? '' : (pct(times[ours]!, 50) / pct(times[k]!, 50)).toFixed(3);
    process.stdout.write(`${s.label.padEnd(58)} ${fmt(pct(times[k]!, 50))} ${fmt(pct(times[k]!, 90))}  ${ratio}\n`);
  }
}

function cli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => execFile('docker', args, (err, stdout) => (err ? reject(err) : resolve(stdout))));
}

async function dockerodeExec(docker: Docker, container: Docker.Container, cmd: string[]): Promise<string> {
  const exec = await container.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const out = new PassThrough();
  let text = '';
  out.on('data', (b: Buffer) => (text += b.toString()));
  docker.modem.demuxStream(stream, out, new PassThrough());
  await new Promise((r) => stream.once('end', r));
  return text;
}

async function echoHi(sandbox: Sandbox, args: Record<string, unknown>): Promise<void> {
  const r = await sandbox.call('run_command', args, NEVER);
  if ((r.structuredContent as { stdout?: string } | undefined)?.stdout !== 'hi\n') throw new Error(`echo hi failed: ${JSON.stringify(r).slice(0, 200)}`);
}

async function main(): Promise<void> {
  const docker = new Docker();
  const ws = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-bench-docker-'));
  await fs.chown(ws, 65534, 65534);
  const backend = dockerBackend();
  const cleanup: Array<() => Promise<unknown>> = [() => fs.rm(ws, { recursive: true, force: true })];
  try {
    process.stdout.write(
      `docker sandbox bench: image ${IMAGE}, ${os.cpus().length} cores, load ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}\n`,
    );
    // Warm.
    const sandbox = await backend.start({ workspace: ws, limits: DEFAULT_LIMITS, tenant: 'bench' });
    cleanup.unshift(() => sandbox.stop());
    const none = await noneBackend().start({ workspace: ws, limits: DEFAULT_LIMITS, tenant: 'bench' });
    cleanup.unshift(() => none.stop());
    const anchor = await docker.createContainer({
      Image: IMAGE,
      Entrypoint: ['sleep', 'infinity'],
      Cmd: [],
      User: '65534:65534',
      Labels: LABELS,
      HostConfig: HARDENED,
    });
    cleanup.unshift(() => anchor.remove({ force: true }));
    await anchor.start();
    const warmSides: Side[] = [
      { label: 'docker backend: run_command {argv:[echo,hi]}', call: () => echoHi(sandbox, { argv: ['echo', 'hi'] }) },
      { label: 'docker backend: run_command {command:"echo hi"} (sh -c)', call: () => echoHi(sandbox, { command: 'echo hi' }) },
      { label: 'none backend: run_command {argv:[echo,hi]} (agent alone)', call: () => echoHi(none, { argv: ['echo', 'hi'] }) },
      { label: 'docker exec C echo hi (CLI)', call: () => cli(['exec', anchor.id, 'echo', 'hi']), settleMs: 30 },
      { label: 'dockerode exec echo hi (hijack + demux)', call: () => dockerodeExec(docker, anchor, ['echo', 'hi']), settleMs: 30 },
    ];
    const warm = await alternate(warmSides, QUICK ? 60 : 300, 20);
    table('warm: run_command echo hi (target: p50 <= 5 ms)', warmSides, warm);

    // The channel alone: a call that spawns nothing, through the container's attached stdio vs a child's pipes.
    await fs.writeFile(path.join(ws, 'one-kib.txt'), 'x'.repeat(1024));
    const readFile = (s: Sandbox) => async () => {
      const r = await s.call('read_file', { path: 'one-kib.txt' }, NEVER);
      if (r.isError) throw new Error(`read_file failed: ${JSON.stringify(r).slice(0, 200)}`);
    };
    const channelSides: Side[] = [
      { label: 'docker backend: read_file 1 KiB (attached stdio via dockerd)', call: readFile(sandbox) },
      { label: 'none backend: read_file 1 KiB (child pipes)', call: readFile(none) },
    ];
    table('channel: a call that runs no process', channelSides, await alternate(channelSides, QUICK ? 100 : 1000, 50));

    // Cold.
    const coldSides: Side[] = [
      {
        label: 'docker backend: start() until the agent answers (+ stop)',
        call: async () => {
          const t0 = performance.now();
          const s = await backend.start({ workspace: ws, limits: DEFAULT_LIMITS, tenant: 'bench' });
          const ms = performance.now() - t0;
          await s.stop();
          await new Promise((r) => setTimeout(r, 50)); // let dockerd finish the removal off the clock
          return ms;
        },
      },
      {
        label: 'dockerode create + start, same image and hardening (+ rm)',
        call: async () => {
          const t0 = performance.now();
          const c = await docker.createContainer({
            Image: IMAGE,
            Entrypoint: ['sleep', 'infinity'],
            Cmd: [],
            User: '65534:65534',
            Labels: LABELS,
            HostConfig: HARDENED,
          });
          await c.start();
          const ms = performance.now() - t0;
          await c.remove({ force: true });
          await new Promise((r) => setTimeout(r, 50));
          return ms;
        },
      },
    ];
    // Time only the part before the clean-up: each side returns its own measure.
    const coldCalls = QUICK ? 8 : 30;
    const cold = coldSides.map(() => [] as number[]);
    for (const s of coldSides) await s.call();
    for (let i = 0; i < coldCalls; i++) for (const [k, s] of coldSides.entries()) cold[k]!.push((await s.call()) as number);
    cold.forEach((t) => t.sort((a, b) => a - b));
    table('cold: a new sandbox until it answers (target: p50 <= 250 ms)', coldSides, cold);
  } finally {
    for (const c of cleanup) await c().catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
