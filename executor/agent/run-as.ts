/**
 * How the agent keeps the commands it runs away from its own channel to the executor.
 *
 * The agent and its commands run under one uid: the workspace owner's, so every file the sandbox
 * writes keeps that owner (a local user's checkout stays theirs; a tenant's workspace stays its
 * uid's). A process of the same uid may normally read another's /proc/PID/fd and mem and take its
 * descriptors with pidfd_getfd (this kernel has no Yama), so a command could steal the agent's
 * stdout and answer the executor itself. The kernel refuses all of that when the target is
 * non-dumpable, and it marks a process non-dumpable when the process changes its own credentials.
 * Node has no prctl(PR_SET_DUMPABLE), but it has setuid: so the agent starts as root (with only
 * CAP_SETUID and CAP_SETGID, granted by the backend) and drops to the owner's uid itself, before it
 * reads a byte of input. Its commands then start dumpable (exec resets the flag) but cannot touch
 * it; the sandbox's init (bwrap's pid 1, docker-init), which also holds the channel, stays root.
 *
 * `fs.suid_dumpable=1` (a debugging setting) would leave the agent dumpable after the drop: the
 * agent checks the result and refuses to run rather than run unprotected.
 */
import { statSync } from 'node:fs';

export interface RunAs {
  uid: number;
  gid: number;
}

/** Parses `UID:GID` (both plain non-negative integers, neither 0: the sandbox never runs tools as root). */
export function parseRunAs(text: string): RunAs {
  const m = /^(\d{1,10}):(\d{1,10})$/.exec(text);
  if (!m) throw new Error(`--run-as must be UID:GID, got "${text}"`);
  const uid = Number(m[1]);
  const gid = Number(m[2]);
  if (uid === 0 || gid === 0) throw new Error('--run-as must not be root: the sandbox never runs tools as uid or gid 0');
  if (uid > 0xfffffffe || gid > 0xfffffffe) throw new Error(`--run-as ids must be below 2^32-1, got "${text}"`);
  return { uid, gid };
}

/**
 * True when this process is dumpable (another process of its uid may open its /proc files). The
 * kernel shows a non-dumpable process's /proc/PID files as owned by root (of its user namespace),
 * not by its uid.
 */
export function isDumpable(): boolean {
  return statSync('/proc/self/stat').uid === process.getuid!();
}

/** Drops from root to `target` for good, and checks the kernel made this process non-dumpable. */
export function dropTo(target: RunAs): void {
  if (process.getuid!() !== 0) {
    throw new Error(`the agent was asked to run as ${target.uid}:${target.gid} but started as uid ${process.getuid!()}, not root: it cannot switch`);
  }
  process.setgroups!([target.gid]);
  process.setgid!(target.gid);
  process.setuid!(target.uid); // last: afterwards nothing can be changed back
  if (process.getuid!() !== target.uid || process.geteuid!() !== target.uid || process.getgid!() !== target.gid) {
    throw new Error(`switching to ${target.uid}:${target.gid} did not take`);
  }
  if (isDumpable()) {
    throw new Error(
      'the agent is still dumpable after switching uid (is fs.suid_dumpable set to 1?): its commands could reach its channel, so it will not run',
    );
  }
}
