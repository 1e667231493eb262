/** Signals for process groups: every command leads its own group, so `-pid` reaches all it spawned. */
import { constants } from 'node:os';

/** Sends `signal` to the group led by `pid`; false when the group is gone (or not ours). */
export function signalGroup(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

const names = new Map<number, string>(Object.entries(constants.signals).map(([name, n]) => [n, name]));

/** `9` → `SIGKILL`; node-pty reports signals as numbers, child_process as names. */
export const signalName = (n: number): string => names.get(n) ?? `signal ${n}`;

/** The signals kill_process accepts. */
export const KILL_SIGNALS = ['SIGTERM', 'SIGKILL', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGSTOP', 'SIGCONT'] as const;
