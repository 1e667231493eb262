/**
 * Processes the HTTP benchmarks start: `toolgate serve`, `toolgate executor`, anchors. Each is
 * spawned with an explicit environment and stopped by its own pid (SIGTERM, then SIGKILL after a
 * grace time). Its stderr goes to a file, as a deployment's log would (the executor writes an
 * audit line per call): a pipe would make the bench process, which also runs the callers, wake
 * up for every line. The file's tail explains a failed start.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { request } from 'undici';

export interface Service {
  name: string;
  pid: number;
  stderr(): string;
  /** Resolves when it has exited. */
  readonly exited: Promise<void>;
  stop(): Promise<void>;
}

export function startService(
  name: string,
  file: string,
  args: string[],
  env: Record<string, string>,
  cwd?: string,
  extraNodeFlags: readonly string[] = [],
): Service {
  // TOOLGATE_BENCH_NODE_FLAGS last: V8 takes the last of a repeated flag, so they override.
  const nodeFlags = file === process.execPath ? [...extraNodeFlags, ...(process.env.TOOLGATE_BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean)] : [];
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'toolgate-bench-log-'));
  const logFile = path.join(logDir, 'stderr.log');
  const fd = openSync(logFile, 'a');
  const child: ChildProcess = spawn(file, [...nodeFlags, ...args], { env, stdio: ['ignore', 'ignore', fd], ...(cwd ? { cwd } : {}) });
  closeSync(fd);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stderr = () => {
    try {
      return readFileSync(logFile, 'utf8').slice(-8000);
    } catch {
      return '';
    }
  };
  return {
    name,
    pid: child.pid!,
    stderr,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(killer);
      }
      rmSync(logDir, { recursive: true, force: true });
    },
  };
}

/** A port nobody listens on right now on 127.0.0.1 (the kernel's pick). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Polls `url` until it answers 200, or fails with the service's stderr once it exits or times out. */
export async function waitForHttp(service: Service, url: string, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  let gone = false;
  void service.exited.then(() => (gone = true));
  for (;;) {
    if (gone) throw new Error(`${service.name} exited during start-up:\n${service.stderr().trim()}`);
    try {
      const res = await request(url, { method: 'GET', headersTimeout: 2000, bodyTimeout: 2000 });
      await res.body.dump();
      if (res.statusCode === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > until) throw new Error(`${service.name} was not ready at ${url} within ${timeoutMs} ms:\n${service.stderr().trim()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The environment a benchmark gives a process: nothing inherited but PATH and the locale. */
export function baseEnv(extra: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: process.env.HOME ?? '/root', ...extra };
}
