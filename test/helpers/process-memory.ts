/**
 * Reads what processes hold in memory, from the host (as root), to prove a value is not there:
 * every readable mapping of every process of a uid, searched for byte strings. Used by the
 * secrets suites: a sandbox's processes must never hold a secret's value, only its placeholder
 * (which the same scan must find, so a scan that reads nothing cannot pass).
 */
import { promises as fs } from 'node:fs';

/** The host pids whose real uid is `uid`. */
export async function pidsOfUid(uid: number): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    // A process may exit between readdir and the read: it holds nothing any more.
    const status = await fs.readFile(`/proc/${entry}/status`, 'utf8').catch(() => '');
    const real = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    if (real !== undefined && Number(real) === uid) pids.push(Number(entry));
  }
  return pids;
}

const CHUNK = 1 << 20;

export interface ScannedProcess {
  pid: number;
  /** argv, space-joined. */
  command: string;
  /** Bytes of memory read (a process whose memory could not be read is not listed). */
  bytes: number;
  /** For each needle, whether this process's memory holds it. */
  holds: boolean[];
}

/** Reads every readable mapping of each of `pids` and reports which hold each needle. */
export async function scanProcesses(pids: readonly number[], needles: readonly string[]): Promise<ScannedProcess[]> {
  const wanted = needles.map((n) => Buffer.from(n));
  const scanned: ScannedProcess[] = [];
  for (const pid of pids) {
    const found = await scanProcess(pid, wanted).catch(() => undefined);
    if (!found || found.bytes === 0) continue;
    const command = (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0').join(' ').trim();
    scanned.push({ pid, command, ...found });
  }
  return scanned;
}

async function scanProcess(pid: number, wanted: readonly Buffer[]): Promise<{ bytes: number; holds: boolean[] }> {
  const maps = await fs.readFile(`/proc/${pid}/maps`, 'utf8');
  const mem = await fs.open(`/proc/${pid}/mem`, 'r');
  const hit = wanted.map(() => false);
  let total = 0;
  const overlap = Math.max(...wanted.map((w) => w.length)) - 1;
  try {
    for (const line of maps.split('\n')) {
      const m = /^([0-9a-f]+)-([0-9a-f]+) r/.exec(line);
      if (!m || line.endsWith('[vvar]') || line.endsWith('[vsyscall]') || line.endsWith('[vvar_vclock]')) continue;
      const [start, end] = [parseInt(m[1]!, 16), parseInt(m[2]!, 16)];
      for (let at = start; at < end; at += CHUNK - overlap) {
        const size = Math.min(CHUNK, end - at);
        const buf = Buffer.alloc(size);
        const { bytesRead } = await mem.read(buf, 0, size, at).catch(() => ({ bytesRead: 0 }));
        const got = buf.subarray(0, bytesRead);
        total += bytesRead;
        wanted.forEach((w, i) => (hit[i] ||= got.includes(w)));
        if (bytesRead < size) break;
      }
    }
  } finally {
    await mem.close();
  }
  return { bytes: total, holds: hit };
}
