/**
 * Reads a V8 .cpuprofile (node --cpu-prof) into what a report needs: CPU time busy (not idle),
 * time in GC, and the functions with the most self and inclusive time, each also as µs per call.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface FunctionTime {
  name: string;
  /** Where: a project file relative to the repo, or `pkg:<name>`, or `node:<module>`. */
  where: string;
  selfMs: number;
  totalMs: number;
}

export interface ProfileSummary {
  wallMs: number;
  busyMs: number;
  idleMs: number;
  gcMs: number;
  /** Self time per place (project file, package or Node internals). */
  byPlace: Array<{ where: string; selfMs: number }>;
  functions: FunctionTime[];
}

function place(url: string, repoRoot: string): string {
  if (!url) return '(native)';
  const file = url.startsWith('file://') ? url.slice(7) : url;
  const nm = file.lastIndexOf('/node_modules/');
  if (nm !== -1) {
    const rest = file.slice(nm + 14).split('/');
    return `pkg:${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  if (file.startsWith('node:')) return file;
  if (file.startsWith(repoRoot)) return path.relative(repoRoot, file);
  return file;
}

/**
 * @param window only samples taken in [fromUs, toUs] count: V8's profile clock is CLOCK_MONOTONIC
 *   in µs, the same clock as process.hrtime, so a driver can cut out start-up and warm-up.
 */
export function readProfile(file: string, repoRoot: string, window?: { fromUs: number; toUs: number }): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  // timeDeltas[i] is the time before sample i; attribute it to that sample's node.
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (window && (at < window.fromUs || at > window.toUs)) return;
    self.set(id, (self.get(id) ?? 0) + delta / 1000);
  });
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  let idleMs = 0;
  let gcMs = 0;
  let totalMs = 0;
  const key = (n: ProfileNode) => `${n.callFrame.functionName || '(anonymous)'}\u0000${place(n.callFrame.url, repoRoot)}:${n.callFrame.lineNumber + 1}`;
  const fnSelf = new Map<string, number>();
  const fnTotal = new Map<string, number>();
  const placeSelf = new Map<string, number>();
  for (const [id, ms] of self) {
    const node = byId.get(id)!;
    totalMs += ms;
    const name = node.callFrame.functionName;
    if (name === '(idle)') {
      idleMs += ms;
      continue;
    }
    if (name === '(garbage collector)') gcMs += ms;
    fnSelf.set(key(node), (fnSelf.get(key(node)) ?? 0) + ms);
    const where = name.startsWith('(') ? name : place(node.callFrame.url, repoRoot);
    placeSelf.set(where, (placeSelf.get(where) ?? 0) + ms);
    // Inclusive time: once per distinct function on the stack (recursion counted once).
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const k = key(byId.get(cur)!);
      if (seen.has(k)) continue;
      seen.add(k);
      fnTotal.set(k, (fnTotal.get(k) ?? 0) + ms);
    }
  }
  const functions = [...fnTotal.keys()].map((k) => {
    const [name, where] = k.split('\u0000') as [string, string];
    return { name, where, selfMs: fnSelf.get(k) ?? 0, totalMs: fnTotal.get(k) ?? 0 };
  });
  return {
    wallMs: window ? (window.toUs - window.fromUs) / 1000 : (profile.endTime - profile.startTime) / 1000,
    busyMs: totalMs - idleMs,
    idleMs,
    gcMs,
    byPlace: [...placeSelf].map(([where, selfMs]) => ({ where, selfMs })).sort((a, b) => b.selfMs - a.selfMs),
    functions,
  };
}
