/**
 * Shared pieces of the BullMQ-only tests: a bus with test tuning, the compiled tree for
 * consumer processes, and spawning those consumers.
 */
import { ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, promises as fs, statSync } from 'node:fs';
import * as path from 'node:path';
import { BullMqBus, BullMqTuning, createBullMqBus } from '../../shared/bus/bullmq';
import { loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/log';

export const log = createLogger('silent');
const root = path.join(__dirname, '..', '..');

export function bullBus(url: string, env: Record<string, string> = {}, tuning: Partial<BullMqTuning> = {}): Promise<BullMqBus> {
  return createBullMqBus(loadConfig({ TOOLGATE_REDIS_URL: url, ...env }), log, tuning);
}

/** Compiles the tree (tsconfig.build.json) when dist/ lacks the bus or is older than its sources. */
export async function ensureBuilt(): Promise<void> {
  const built = path.join(root, 'dist', 'shared', 'bus', 'bullmq.js');
  const sources = (await fs.readdir(path.join(root, 'shared', 'bus'))).map((f) => path.join(root, 'shared', 'bus', f));
  const fresh = existsSync(built) && sources.every((s) => statSync(s).mtimeMs <= statSync(built).mtimeMs);
  if (fresh) return;
  // Emits even when someone else's file has a type error; only our output matters here.
  await new Promise<void>((resolve) => execFile('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: root }, () => resolve()));
  if (!existsSync(built)) throw new Error('npx tsc -p tsconfig.build.json did not produce dist/shared/bus/bullmq.js');
}

export interface ConsumerProcess {
  child: ChildProcess;
  /** Resolves with the exit once the process is gone. */
  exited: Promise<void>;
}

/** Starts test/bus/fixtures/consumer.js and waits for its "ready". */
export async function spawnConsumer(env: Record<string, string>): Promise<ConsumerProcess> {
  const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'consumer.js')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('ready')) resolve();
    });
    void exited.then(() => reject(new Error(`the consumer process exited before it was ready: ${stderr}`)));
  });
  return { child, exited };
}

export async function stopConsumer(consumer: ConsumerProcess | undefined): Promise<void> {
  if (!consumer || consumer.child.exitCode !== null || consumer.child.signalCode !== null) return;
  consumer.child.kill('SIGKILL');
  await consumer.exited;
}

/** Lines "<pid> <job id>" the consumers wrote, as [pid, id] pairs. */
export async function runs(file: string): Promise<Array<[string, string]>> {
  const text = await fs.readFile(file, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' ') as [string, string]);
}

export async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
