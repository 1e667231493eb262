/**
 * egress: a sandbox's download through governed egress against the same download made directly
 * on the host, in the same run. Ours is the whole path a sandboxed `curl` takes: the client →
 * the agent's relay on loopback (its own process, as in a sandbox) → the channel's Unix socket →
 * the executor's proxy (its own process: policy lookup, pinned name, SSRF check, accounting) →
 * the origin. Theirs is the client → the origin. The client (this process) opens a new
 * connection per request on both sides, as curl does, and reads every byte.
 * - 64 MiB download: throughput, target ≥ 0.8× direct (median of round ratios).
 * - small request (`/small`, 3 bytes): the latency the proxy adds, target p50 ≤ 1 ms over direct.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { alternate, Side } from './lib/alternate';
import { hasProduct, REPO_ROOT } from './lib/product';
import type { Benchmark, BenchContext, Row } from './lib/types';

const BIG = 64 * 1024 * 1024;

/** Starts one role of anchors/egress-path.ts and resolves with its first line. */
function role(children: ChildProcess[], ...args: string[]): Promise<string> {
  const child = spawn(process.execPath, [path.join(REPO_ROOT, 'dist-bench/bench/anchors/egress-path.js'), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (t: string) => {
      out += t;
      const nl = out.indexOf('\n');
      if (nl !== -1) resolve(out.slice(0, nl));
    });
    child.once('exit', (code) => reject(new Error(`egress-path ${args[0]} exited with ${code}`)));
  });
}

/** GETs `pathOrUrl` from 127.0.0.1:`port` on a new connection; resolves with the bytes read. */
function fetchAll(port: number, pathOrUrl: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: pathOrUrl, headers: { host }, agent: false }, (res) => {
      let n = 0;
      res.on('data', (c: Buffer) => (n += c.length));
      res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`status ${res.statusCode}`))));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

export const egressBench: Benchmark = {
  name: 'egress',
  title: 'egress: a download through the relay and the proxy vs directly',
  async unavailable() {
    return hasProduct('executor/egress/index') && hasProduct('executor/agent/egress-relay') ? undefined : 'dist/ has no egress proxy: build first';
  },
  async run(ctx: BenchContext): Promise<Row[]> {
    const children: ChildProcess[] = [];
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-bench-egress-'));
    const socket = path.join(dir, 'egress.sock');
    try {
      const originPort = Number(await role(children, 'origin'));
      await role(children, 'proxy', socket, String(originPort));
      const relayPort = Number(await role(children, 'relay', socket));
      const [origin, proxy, relay] = children.map((c) => c.pid!);
      const authority = `origin.test:${originPort}`;
      const side = (label: string, via: 'proxy' | 'direct', target: string): Side =>
        via === 'proxy'
          ? { label, call: () => fetchAll(relayPort, `http://${authority}${target}`, authority), pids: () => [proxy!, relay!], cpuPids: () => [origin!] }
          : { label, call: () => fetchAll(originPort, target, `127.0.0.1:${originPort}`), pids: () => [], cpuPids: () => [origin!] };
      const rows: Row[] = [];

      ctx.log('egress: 64 MiB downloads');
      const bigPlan = ctx.quick ? { warmup: 2, calls: 12, rounds: 4, concurrency: 1 } : { warmup: 3, calls: 40, rounds: 10, concurrency: 1 };
      const [bigOurs, bigTheirs] = await alternate(
        [side('relay + egress proxy', 'proxy', `/big?n=${BIG}`), side('direct on the host', 'direct', `/big?n=${BIG}`)],
        bigPlan,
      );
      rows.push({
        bench: 'egress',
        case: '64 MiB download, new connection each',
        ours: { label: 'sandbox relay → Unix socket → egress proxy → origin', summary: bigOurs! },
        theirs: { label: 'client → origin, on the host', summary: bigTheirs! },
        concurrency: 1,
        target: { metric: 'throughput-ratio', op: '>=', value: 0.8 },
        note: `throughput: ours ${((BIG / 1024 / 1024) * bigOurs!.callsPerSec).toFixed(0)} MiB/s, direct ${((BIG / 1024 / 1024) * bigTheirs!.callsPerSec).toFixed(0)} MiB/s; ours' CPU is the relay's and the proxy's processes`,
      });

      ctx.log('egress: small requests');
      const smallPlan = ctx.quick ? { warmup: 200, calls: 400, rounds: 4, concurrency: 1 } : { warmup: 500, calls: 2000, rounds: 20, concurrency: 1 };
      const [smallOurs, smallTheirs] = await alternate(
        [side('relay + egress proxy', 'proxy', '/small'), side('direct on the host', 'direct', '/small')],
        smallPlan,
      );
      rows.push({
        bench: 'egress',
        case: 'small GET, new connection each',
        ours: { label: 'sandbox relay → Unix socket → egress proxy → origin', summary: smallOurs! },
        theirs: { label: 'client → origin, on the host', summary: smallTheirs! },
        concurrency: 1,
        target: { metric: 'p50-added-ms', op: '<=', value: 1 },
        note: 'ours: two more connections (client → relay, relay → proxy socket), the policy lookup, a pinned name and the SSRF check, per request',
      });
      return rows;
    } finally {
      for (const child of children) child.kill('SIGKILL');
      await fs.rm(dir, { recursive: true, force: true });
    }
  },
};
