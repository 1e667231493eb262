/**
 * Who made a workspace mount or a sandbox container, recorded so that another process can tell
 * whether its maker still runs. Several executors (and `serve`s) may share a data directory or a
 * Docker host, often under the same executor id (its default is the host name): a start-up must
 * clean what a dead run left and never touch what a live one holds. A process is named by its
 * host, the kernel's boot id, its pid and its start time (a pid is reused; the pair is not).
 */
import { readFileSync, readlinkSync } from 'node:fs';
import * as os from 'node:os';

export interface OwnerRecord {
  /** The executor id (TOOLGATE_EXECUTOR_ID). */
  id: string;
  host: string;
  boot: string;
  pid: number;
  /** The process's start time in clock ticks since boot (/proc/PID/stat, field 22). */
  start: string;
  /**
   * Its pid namespace (`pid:[inode]`): a process in a container that shares the host's name and
   * kernel (network_mode host) sees other pids, so only the same namespace can prove one gone.
   */
  pidns?: string;
}

/** alive and dead are proven on this host; unknown: another host's (or an unmarked) owner. */
export type OwnerState = 'alive' | 'dead' | 'unknown';

function pidNamespace(): string {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return '';
  }
}

function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return '';
  }
}

/** The start time of a process, or undefined when it does not exist (in this pid namespace). */
function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** This process, under the executor id `id`. */
export function currentOwner(id: string): OwnerRecord {
  return { id, host: os.hostname(), boot: bootId(), pid: process.pid, start: startTime(process.pid) ?? '', pidns: pidNamespace() };
}

/** Reads a recorded owner: JSON, or a bare executor id (what runs before the records wrote). */
export function parseOwner(text: string): Pick<OwnerRecord, 'id'> & Partial<OwnerRecord> {
  try {
    const value = JSON.parse(text) as Partial<OwnerRecord>;
    if (typeof value === 'object' && value !== null && typeof value.id === 'string') return value as OwnerRecord;
  } catch {
    // a bare id
  }
  return { id: text.trim() };
}

export function ownerState(record: Partial<OwnerRecord>): OwnerState {
  if (record.pid === undefined || record.start === undefined || record.host !== os.hostname() || !record.boot) return 'unknown';
  if (record.boot !== bootId()) return 'dead'; // this host rebooted since
  // Another pid namespace (a container beside us on the same kernel): its pids are not ours to read.
  if (!record.pidns || record.pidns !== pidNamespace()) return 'unknown';
  return startTime(record.pid) === record.start ? 'alive' : 'dead';
}

export function sameOwner(a: Partial<OwnerRecord>, b: OwnerRecord): boolean {
  return a.id === b.id && a.host === b.host && a.boot === b.boot && a.pid === b.pid && a.start === b.start;
}

/**
 * Whether the process `self` may clean up what `record` made: its own, always; another live
 * process's, never; once its owner provably no longer runs, always; for an owner it cannot check
 * (another host's, or from before these records), only under the same executor id, which the
 * operator keeps unique per executor (docs/executor.md).
 */
export function mayCleanUp(record: Pick<OwnerRecord, 'id'> & Partial<OwnerRecord>, self: OwnerRecord): boolean {
  if (sameOwner(record, self)) return true;
  const state = ownerState(record);
  return state === 'dead' || (state === 'unknown' && record.id === self.id);
}
