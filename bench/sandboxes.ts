/**
 * sandboxes: `run_command {argv: [echo, hi]}` in a warm sandbox, through the Sandbox interface the
 * executor uses (JSON-RPC to the agent inside), on each backend that runs here, against running
 * the same program directly: a bare spawn from Node for none and bwrap, `docker exec` into a
 * running container of the same image for docker. And cold start: a new sandbox until its agent
 * answers, against starting a bare Node process (none, bwrap) or dockerode create + start (docker).
 * Bare spawns come from a small separate Node process (anchors/spawner.ts), not from the bench.
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { alternate, Measured, Side } from './lib/alternate';
import { canRunBwrap } from './lib/availability';
import { coldStarts, dockerExecPaired, spawning } from './lib/plan';
import { dockerReason, DockerAnchor, startDockerAnchor } from './lib/docker';
import { agentPids, BackendName, createBackend, dockerSandboxPids, echoHi, makeWorkspace, startSandbox } from './lib/sandbox';
import { REPO_ROOT } from './lib/product';
import type { Benchmark, BenchContext, Row } from './lib/types';

/** A small Node process that spawns what it is asked to (anchors/spawner.ts), one call at a time. */
class Spawner {
  private readonly child = spawn(process.execPath, [path.join(REPO_ROOT, 'dist-bench/bench/anchors/spawner.js')], { stdio: ['pipe', 'pipe', 'inherit'] });
  private waiting: Array<(line: string) => void> = [];
  private buffered = '';

  constructor() {
    this.child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      this.buffered += chunk;
      let nl: number;
      while ((nl = this.buffered.indexOf('\n')) !== -1) {
        const line = this.buffered.slice(0, nl);
        this.buffered = this.buffered.slice(nl + 1);
        this.waiting.shift()?.(line);
      }
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  async run(argv: string[], expect: string): Promise<void> {
    const line = await new Promise<string>((resolve) => {
      this.waiting.push(resolve);
      this.child.stdin.write(`${JSON.stringify(argv)}\n`);
    });
    const r = JSON.parse(line) as { code: number; out: string };
    if (r.code !== 0 || r.out !== expect) throw new Error(`spawner: ${argv.join(' ')} exited ${r.code}: ${r.out}`);
  }

  close(): void {
    this.child.stdin.end();
  }
}

export const sandboxesBench: Benchmark = {
  name: 'sandboxes',
  title: 'sandboxes: run_command echo hi, warm, per backend vs a bare spawn / docker exec; cold start',
  async unavailable() {
    return undefined;
  },
  async run(ctx: BenchContext): Promise<Row[]> {
    const rows: Row[] = [];
    const ws = await makeWorkspace();
    const warm = spawning(ctx);
    const cold = coldStarts(ctx);
    const backends: BackendName[] = ['none'];
    const bwrapWhy = await canRunBwrap();
    if (bwrapWhy) ctx.log(`sandboxes: bwrap skipped: ${bwrapWhy}`);
    else backends.push('bwrap');
    const dockerWhy = await dockerReason(ctx);
    if (dockerWhy) ctx.log(`sandboxes: docker skipped: ${dockerWhy}`);
    else backends.push('docker');
    let anchor: DockerAnchor | undefined;
    const spawner = new Spawner();
    const bareEcho: Side = {
      label: 'bare spawn echo hi (a small Node spawner process)',
      call: () => spawner.run(['/bin/echo', 'hi'], 'hi\n'),
      pids: () => [spawner.pid],
    };
    const bareNode: Side = { label: 'bare spawn node -e 0, start to exit (same spawner)', call: () => spawner.run([process.execPath, '-e', '0'], '') };
    try {
      for (const name of backends) {
        const backend = createBackend(name);
        // Warm: one sandbox, many calls.
        const sandbox = await startSandbox(name, ws.dir, backend);
        try {
          let theirs: Side = bareEcho;
          if (name === 'docker') {
            anchor ??= await startDockerAnchor();
            theirs = { label: 'docker exec C echo hi (CLI)', call: () => anchor!.exec(['echo', 'hi'], 'hi\n') };
          }
          const plan = name === 'docker' ? dockerExecPaired(ctx) : warm;
          ctx.log(`sandboxes: ${name}: warm run_command echo hi, ${plan.calls} calls per side`);
          const containerPids = name === 'docker' ? await dockerSandboxPids() : [];
          const ours: Side = {
            label: `run_command in a warm ${name} sandbox`,
            call: () => echoHi(sandbox),
            pids: name === 'docker' ? () => containerPids : () => agentPids(),
          };
          const [o, t] = await alternate([ours, theirs], plan);
          rows.push({
            bench: 'sandboxes',
            case: `run_command echo hi, warm [${name}]`,
            ours: { label: ours.label, summary: o! },
            theirs: { label: theirs.label, summary: t! },
            concurrency: 1,
            target: name === 'docker' ? { metric: 'p50-ms', op: '<=', value: 5 } : undefined,
            note:
              name === 'docker'
                ? 'peak RSS and CPU µs/call: the container (init + agent) — each echo has exited before /proc can be read; the executor side of the attached stream is the bench process'
                : 'peak RSS and CPU µs/call: the sandbox agent (node) / the spawner process — each echo has exited before /proc can be read',
          });
        } finally {
          await sandbox.stop();
        }
        // Cold: a new sandbox until its agent answers; stopping it is not timed.
        ctx.log(`sandboxes: ${name}: cold start, ${cold.calls} starts per side`);
        const start: Side = {
          label: `${name} sandbox start (agent answering)`,
          call: async (): Promise<Measured> => {
            const t0 = performance.now();
            const s = await startSandbox(name, ws.dir, backend);
            const measuredMs = performance.now() - t0;
            await s.stop();
            return { measuredMs };
          },
        };
        let ref: Side = bareNode;
        if (name === 'docker') {
          anchor ??= await startDockerAnchor();
          ref = { label: 'dockerode create + start (same image)', call: () => anchor!.createStart() };
        }
        const [o, t] = await alternate([start, ref], cold);
        rows.push({
          bench: 'sandboxes',
          case: `cold start [${name}]`,
          ours: { label: start.label, summary: o! },
          theirs: { label: ref.label, summary: t! },
          concurrency: 1,
          target: name === 'docker' ? { metric: 'p50-ms', op: '<=', value: 250 } : undefined,
        });
      }
      return rows;
    } finally {
      spawner.close();
      await anchor?.close();
      await ws.remove();
    }
  },
};
