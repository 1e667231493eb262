/**
 * Resident memory of process trees, read from /proc. A side's "peak RSS" is the largest sum of
 * VmRSS over its process and every descendant seen by a sampler that ticks while it runs
 * (the server plus its sandbox agent, a gateway plus nothing, a container's init plus its agent).
 */
import { readdirSync, readFileSync } from 'node:fs';

function readStatus(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined; // gone
  }
}

/** VmRSS of one process in KiB (0 if it is gone). */
export function rssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readStatus(pid) ?? '');
  return m ? Number(m[1]) : 0;
}

/** The parent of `pid` (undefined if it is gone). */
export function parentPid(pid: number): number | undefined {
  const m = /^PPid:\s+(\d+)/m.exec(readStatus(pid) ?? '');
  return m ? Number(m[1]) : undefined;
}

/** parent pid → its children, for every process now. */
export function childrenMap(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const ppid = parentPid(Number(name));
    if (ppid === undefined) continue;
    const list = children.get(ppid) ?? [];
    list.push(Number(name));
    children.set(ppid, list);
  }
  return children;
}

/** The pid and all its descendants. */
export function processTree(pid: number, children = childrenMap()): number[] {
  const out: number[] = [];
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop()!;
    out.push(p);
    stack.push(...(children.get(p) ?? []));
  }
  return out;
}

/**
 * Memory of one process split the way that matters when many run on one host (smaps_rollup):
 * anonymous pages are its own; file pages (the node binary, mostly) are shared by every Node
 * process, so PSS charges each only its share.
 */
export function memoryBreakdownMiB(pid: number): { rss: number; anon: number; file: number; pss: number } {
  const status = readStatus(pid) ?? '';
  const field = (text: string, name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) / 1024;
  let rollup = '';
  try {
    rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  } catch {
    // gone, or not readable
  }
  return { rss: field(status, 'VmRSS'), anon: field(status, 'RssAnon'), file: field(status, 'RssFile'), pss: field(rollup, 'Pss') };
}

export function treeRssMiB(pid: number, children = childrenMap()): number {
  return processTree(pid, children).reduce((sum, p) => sum + rssKiB(p), 0) / 1024;
}

/**
 * Samples named process trees every `intervalMs` until stopped; `peak(name)` is the largest
 * tree total seen. Roots are functions so a side can report pids that appear later.
 */
export class RssSampler {
  private readonly peaks = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly roots: ReadonlyMap<string, () => number[]>,
    private readonly intervalMs = 100,
  ) {}

  start(): this {
    this.tick();
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
    return this;
  }

  stop(): void {
    this.tick();
    clearInterval(this.timer);
  }

  peak(name: string): number | undefined {
    return this.peaks.get(name);
  }

  private tick(): void {
    const children = childrenMap();
    for (const [name, pids] of this.roots) {
      const roots = pids();
      if (roots.length === 0) continue;
      const total = roots.reduce((sum, pid) => sum + treeRssMiB(pid, children), 0);
      this.peaks.set(name, Math.max(this.peaks.get(name) ?? 0, total));
    }
  }
}

/**
 * Scheduler accounting of a process tree, summed over every thread (/proc/PID/task/TID/schedstat):
 * time on a CPU, and time spent runnable but waiting for one (run delay), both in ns. Unlike a
 * latency, CPU per call barely moves with a neighbour's load; run delay is what the load costs.
 */
export interface SchedTotals {
  cpuNs: number;
  runDelayNs: number;
}

export function treeSched(pid: number, children = childrenMap()): SchedTotals {
  return sched(processTree(pid, children));
}

/** The same for a list of processes (each alone, without its children). */
export function sched(pids: readonly number[]): SchedTotals {
  const total: SchedTotals = { cpuNs: 0, runDelayNs: 0 };
  for (const p of pids) {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue; // gone
    }
    for (const tid of tasks) {
      try {
        const [cpu, delay] = readFileSync(`/proc/${p}/task/${tid}/schedstat`, 'utf8').trim().split(' ').map(Number);
        total.cpuNs += cpu ?? 0;
        total.runDelayNs += delay ?? 0;
      } catch {
        // thread gone
      }
    }
  }
  return total;
}
