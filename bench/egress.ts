/**
 * egress: a sandbox's download through governed egress against the same download made directly
 * on the host, in the same run. Ours is the whole path a sandboxed `curl` takes: the client →
 * the agent's relay on loopback (its own process, as in a sandbox, with the agent's node flags)
 * → the channel's Unix socket → the executor's proxy (its own process: policy lookup, pinned
 * name, SSRF check, accounting) → the origin. Theirs is the client → the origin. The client (this
 * process) opens a new connection per request on every side, as curl does, and reads every byte.
 * - 64 MiB download: throughput, target ≥ 0.8× direct (median of round ratios).
 * - small request (`/small`, 3 bytes): the latency the proxy adds, target p50 ≤ 1 ms over direct.
 * Each is measured for a forwarded `http://` request and through a CONNECT tunnel (HTTPS's way,
 * here with plain HTTP inside so both sides do the same work at the ends).
 *
 * The floor, in the same alternating rounds: the same topology (a relay process, a Unix socket,
 * a proxy process) from bare Node parts (anchors/egress-path.ts `floor-*`). floor ÷ direct is
 * the best this topology reaches on this machine; ours ÷ floor is what toolgate's own work costs.
 * Beside it, one bare Node process piping the bytes (client → it → origin): the least any proxy
 * in the path costs here, whatever its design.
 *
 * Loopback moves bytes faster than any real upstream, so the same download from an origin paced
 * at 1 Gbit/s shows what the path costs a fast real download (diagnosis rows, no target).
 */
import { ChildProcess, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { alternate, Side } from './lib/alternate';
import { hasProduct, productModule, REPO_ROOT } from './lib/product';
import { median } from './lib/stats';
import type { Benchmark, BenchContext, Row, Summary } from './lib/types';

const BIG = 64 * 1024 * 1024;
const MIB = 1024 * 1024;
/** 1 Gbit/s in bytes per second: a fast real upstream, for the paced rows. */
const GBIT = 125_000_000;

/** Starts one role of anchors/egress-path.ts and resolves with its first line. */
function role(children: ChildProcess[], nodeFlags: readonly string[], ...args: string[]): Promise<string> {
  const flags = [...nodeFlags, ...(process.env.TOOLGATE_BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean)];
  const child = spawn(process.execPath, [...flags, path.join(REPO_ROOT, 'dist-bench/bench/anchors/egress-path.js'), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
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

/** Reads a response to its end: resolves with the body's size, rejects unless 200. */
function readAll(req: http.ClientRequest, resolve: (n: number) => void, reject: (err: Error) => void): void {
  req.on('response', (res) => {
    let n = 0;
    res.on('data', (c: Buffer) => (n += c.length));
    res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`status ${res.statusCode}`))));
    res.on('error', reject);
  });
  req.on('error', reject);
}

/** GETs `pathOrUrl` from 127.0.0.1:`port` on a new connection; resolves with the bytes read. */
function fetchAll(port: number, pathOrUrl: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => readAll(http.get({ host: '127.0.0.1', port, path: pathOrUrl, headers: { host }, agent: false }), resolve, reject));
}

/** CONNECTs to `authority` through the proxy on 127.0.0.1:`port`, then GETs `target` inside the tunnel. */
function fetchTunnelled(port: number, authority: string, target: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, noDelay: true });
    socket.once('error', reject);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      socket.off('data', onData);
      // Nothing follows the 200 until the GET below is sent.
      if (!/^HTTP\/1\.1 200 /.test(head.toString('latin1', 0, 13)) || end + 4 !== head.length)
        return void reject(new Error(`CONNECT: ${head.toString('latin1')}`));
      readAll(http.get({ path: target, headers: { host: authority }, createConnection: () => socket }), resolve, reject);
    };
    socket.on('data', onData);
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n\r\n`);
  });
}

/** The median over rounds of a ÷ b (rates) or a − b (p50s). */
function roundMedian(a: Summary, b: Summary, by: 'rate-ratio' | 'p50-difference'): number {
  const [x, y] = by === 'rate-ratio' ? [a.roundCallsPerSec, b.roundCallsPerSec] : [a.roundP50, b.roundP50];
  return median(y.map((v, i) => (by === 'rate-ratio' ? (x[i] ?? NaN) / v : (x[i] ?? NaN) - v)).filter(Number.isFinite));
}

const mibps = (s: Summary) => ((BIG / MIB) * s.callsPerSec).toFixed(0);

async function stop(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }),
  );
}

export const egressBench: Benchmark = {
  name: 'egress',
  title: 'egress: a download through the relay and the proxy vs directly, and the floor',
  async unavailable() {
    return hasProduct('executor/egress/index') && hasProduct('executor/agent/egress-relay') ? undefined : 'dist/ has no egress proxy: build first';
  },
  async run(ctx: BenchContext): Promise<Row[]> {
    const children: ChildProcess[] = [];
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-bench-egress-'));
    const socket = path.join(dir, 'egress.sock');
    const floorSocket = path.join(dir, 'floor.sock');
    // The relay runs in the sandbox agent, with the agent's node flags; the floor's relay gets the same.
    const agentFlags = productModule<typeof import('../executor/sandbox/none')>('executor/sandbox/none').AGENT_NODE_FLAGS;
    try {
      const originPort = Number(await role(children, [], 'origin'));
      await role(children, [], 'proxy', socket, String(originPort));
      const relayPort = Number(await role(children, agentFlags, 'relay', socket));
      await role(children, [], 'floor-proxy', floorSocket);
      const floorPort = Number(await role(children, agentFlags, 'floor-relay', floorSocket));
      const hopPort = Number(await role(children, [], 'one-hop', String(originPort)));
      const [origin, proxy, relay, floorProxy, floorRelay, hop] = children.map((c) => c.pid!);
      const authority = `origin.test:${originPort}`;
      const floorAuthority = `127.0.0.1:${originPort}`;
      const sides = (target: string, withHop = false): Side[] => [
        {
          label: 'ours, http://',
          call: () => fetchAll(relayPort, `http://${authority}${target}`, authority),
          pids: () => [proxy!, relay!],
          cpuPids: () => [origin!],
        },
        { label: 'ours, CONNECT', call: () => fetchTunnelled(relayPort, authority, target), pids: () => [proxy!, relay!], cpuPids: () => [origin!] },
        { label: 'direct', call: () => fetchAll(originPort, target, floorAuthority), cpuPids: () => [origin!] },
        {
          label: 'floor, http://',
          call: () => fetchAll(floorPort, `http://${floorAuthority}${target}`, floorAuthority),
          pids: () => [floorProxy!, floorRelay!],
          cpuPids: () => [origin!],
        },
        {
          label: 'floor, CONNECT',
          call: () => fetchTunnelled(floorPort, floorAuthority, target),
          pids: () => [floorProxy!, floorRelay!],
          cpuPids: () => [origin!],
        },
        ...(withHop ? [{ label: 'one hop', call: () => fetchAll(hopPort, target, floorAuthority), pids: () => [hop!], cpuPids: () => [origin!] }] : []),
      ];
      const ourLabel = (how: string) => `sandbox relay → Unix socket → egress proxy → origin, ${how}`;
      const floorLabel = (how: string) => `bare Node relay → Unix socket → bare Node proxy → origin, ${how} (no toolgate code)`;
      const direct = 'client → origin, on the host';
      const rows: Row[] = [];

      ctx.log('egress: 64 MiB downloads (ours, direct and the floor; forwarded and CONNECT)');
      const bigPlan = ctx.quick ? { warmup: 2, calls: 12, rounds: 4, concurrency: 1 } : { warmup: 3, calls: 40, rounds: 10, concurrency: 1 };
      const [fwd, tun, big, floorFwd, floorTun, oneHop] = (await alternate(sides(`/big?n=${BIG}`, true), bigPlan)) as [
        Summary,
        Summary,
        Summary,
        Summary,
        Summary,
        Summary,
      ];
      const bigNote = (ours: Summary, floor: Summary) =>
        `throughput: ours ${mibps(ours)} MiB/s, direct ${mibps(big)} MiB/s, floor ${mibps(floor)} MiB/s; floor ÷ direct ${roundMedian(floor, big, 'rate-ratio').toFixed(2)} ` +
        `(median of round ratios; the best this topology reaches here), ours ÷ floor ${roundMedian(ours, floor, 'rate-ratio').toFixed(2)}; ` +
        `one bare hop ÷ direct ${roundMedian(oneHop, big, 'rate-ratio').toFixed(2)} (the best any proxy in the path reaches here); CPU: relay + proxy processes and the origin`;
      for (const [how, ours, floor] of [
        ['http:// forwarded', fwd, floorFwd],
        ['CONNECT tunnel', tun, floorTun],
      ] as const) {
        rows.push({
          bench: 'egress',
          case: `64 MiB download, ${how}, new connection each`,
          ours: { label: ourLabel(how), summary: ours },
          theirs: { label: direct, summary: big },
          concurrency: 1,
          target: { metric: 'throughput-ratio', op: '>=', value: 0.8 },
          note: bigNote(ours, floor),
        });
        rows.push({
          bench: 'egress',
          case: `floor: 64 MiB download, ${how}`,
          ours: { label: floorLabel(how), summary: floor },
          theirs: { label: direct, summary: big },
          concurrency: 1,
          note: 'diagnosis, same rounds as the row above: the same processes and hops from bare Node parts',
        });
      }

      rows.push({
        bench: 'egress',
        case: 'floor: 64 MiB download, one bare Node hop',
        ours: { label: 'client → one bare Node process piping the bytes → origin (no relay, no socket, no checks)', summary: oneHop },
        theirs: { label: direct, summary: big },
        concurrency: 1,
        note: 'diagnosis, same rounds as the rows above: the least any proxy in the path costs on this machine, whatever its design; the sandbox needs a relay besides',
      });

      // Loopback moves bytes far faster than any real upstream: paced at 1 Gbit/s, what does the proxy cost a download?
      ctx.log('egress: 64 MiB downloads from an origin paced at 1 Gbit/s (ours and direct)');
      const pacedPlan = ctx.quick ? { warmup: 1, calls: 3, rounds: 3, concurrency: 1 } : { warmup: 1, calls: 6, rounds: 5, concurrency: 1 };
      const [pFwd, pTun, paced] = (await alternate(sides(`/big?n=${BIG}&rate=${GBIT}`).slice(0, 3), pacedPlan)) as [Summary, Summary, Summary];
      for (const [how, ours] of [
        ['http:// forwarded', pFwd],
        ['CONNECT tunnel', pTun],
      ] as const) {
        rows.push({
          bench: 'egress',
          case: `64 MiB from an origin paced at 1 Gbit/s, ${how}`,
          ours: { label: ourLabel(how), summary: ours },
          theirs: { label: 'client → origin, on the host', summary: paced },
          concurrency: 1,
          note: `diagnosis (no target): ours ${mibps(ours)} MiB/s, direct ${mibps(paced)} MiB/s, ours ÷ direct ${roundMedian(ours, paced, 'rate-ratio').toFixed(2)} (median of round ratios)`,
        });
      }

      ctx.log('egress: small requests (ours, direct and the floor; forwarded and CONNECT)');
      const smallPlan = ctx.quick ? { warmup: 200, calls: 400, rounds: 4, concurrency: 1 } : { warmup: 500, calls: 2000, rounds: 20, concurrency: 1 };
      const [sFwd, sTun, small, sFloorFwd, sFloorTun] = (await alternate(sides('/small'), smallPlan)) as [Summary, Summary, Summary, Summary, Summary];
      for (const [how, ours, floor] of [
        ['http:// forwarded', sFwd, sFloorFwd],
        ['CONNECT tunnel', sTun, sFloorTun],
      ] as const) {
        rows.push({
          bench: 'egress',
          case: `small GET, ${how}, new connection each`,
          ours: { label: ourLabel(how), summary: ours },
          theirs: { label: direct, summary: small },
          concurrency: 1,
          target: { metric: 'p50-added-ms', op: '<=', value: 1 },
          note:
            `floor adds ${roundMedian(floor, small, 'p50-difference').toFixed(3)} ms (median of round p50 differences; the least this topology adds here), ` +
            `ours adds ${roundMedian(ours, floor, 'p50-difference').toFixed(3)} ms over the floor: the policy lookup, the pinned name, the SSRF check, accounting`,
        });
        rows.push({
          bench: 'egress',
          case: `floor: small GET, ${how}`,
          ours: { label: floorLabel(how), summary: floor },
          theirs: { label: direct, summary: small },
          concurrency: 1,
          note: "diagnosis, same rounds as the row above: two more connections per request (client → relay, relay → socket) and the proxy's own to the origin, from bare Node parts",
        });
      }
      return rows;
    } finally {
      await stop(children);
      await fs.rm(dir, { recursive: true, force: true });
    }
  },
};
