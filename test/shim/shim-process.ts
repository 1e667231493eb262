/**
 * The real `toolgate shim` binary (dist/bin/toolgate.js) in a child process: frames to its stdin,
 * every stdout line kept. Closing it checks what every run must hold: stdout carried only
 * JSON-RPC responses, one per line, and stderr never showed the token or the API key.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { asResponse, Reply } from '../protocol/wire';
import { until } from './gateway';

export const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');
/** Distinctive secrets, so a leak into stderr or a reply is easy to spot. */
export const TOKEN = 'tok.SECRET-token-5f1c9e.sig';
export const API_KEY = 'key_SECRET-apikey-a83d';

export interface ShimOptions {
  /** Extra arguments after `shim --url URL`. */
  args?: string[];
  /** Environment on top of the defaults (token, API key, log level trace). */
  env?: Record<string, string | undefined>;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** The environment without any TOOLGATE_* setting of the machine running the tests. */
export function cleanEnv(extra: Record<string, string | undefined>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('TOOLGATE_')) env[k] = v;
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) env[k] = v;
  return env;
}

export class ShimProcess {
  readonly lines: string[] = [];
  stderr = '';
  readonly exited: Promise<Exit>;
  private partial = '';

  private constructor(readonly child: ChildProcess) {
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      const parts = (this.partial + chunk).split('\n');
      this.partial = parts.pop()!;
      this.lines.push(...parts);
    });
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      if (this.stderr.length < 1_000_000) this.stderr += chunk;
    });
    child.stdin!.on('error', () => undefined);
    this.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  }

  static async start(url: string, options: ShimOptions = {}): Promise<ShimProcess> {
    if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build first with \`npx tsc -p tsconfig.build.json\``);
    const env = cleanEnv({ TOOLGATE_TOKEN: TOKEN, TOOLGATE_API_KEY: API_KEY, TOOLGATE_LOG_LEVEL: 'trace', ...options.env });
    const child = spawn(process.execPath, [BIN, 'shim', '--url', url, ...(options.args ?? [])], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    return new ShimProcess(child);
  }

  /** Writes one frame: a value is serialized, a string goes as it is; the newline is added. */
  send(frame: unknown): Promise<void> {
    const text = typeof frame === 'string' ? frame : JSON.stringify(frame);
    return new Promise((resolve, reject) => this.child.stdin!.write(text + '\n', (err) => (err ? reject(err) : resolve())));
  }

  /** Every stdout line so far, parsed. */
  get replies(): unknown[] {
    return this.lines.map((l) => JSON.parse(l) as unknown);
  }

  /** The single response carrying `id`, waiting for it. */
  reply(id: string | number | null, timeoutMs = 10_000): Promise<Reply> {
    return until(
      () => this.replies.find((r): r is Reply => typeof r === 'object' && r !== null && !Array.isArray(r) && (r as Reply).id === id),
      `the reply to id ${JSON.stringify(id)}`,
      timeoutMs,
    ).then(asResponse);
  }

  /** The batch reply that contains `id`, waiting for it. */
  batch(id: string | number, timeoutMs = 10_000): Promise<Reply[]> {
    return until(
      () => this.replies.find((r): r is Reply[] => Array.isArray(r) && r.some((e: Reply) => e.id === id)),
      `the batch reply containing id ${JSON.stringify(id)}`,
      timeoutMs,
    ).then((b) => b.map(asResponse));
  }

  /** Closes stdin (EOF) and waits for the exit; SIGKILL if it takes longer than `timeoutMs`. */
  async endInput(timeoutMs = 15_000): Promise<Exit> {
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }

  /** Ends the shim if still running and checks its stdout and stderr. */
  async close(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exit = await this.endInput();
      if (exit.code !== 0) throw new Error(`toolgate shim exited with ${JSON.stringify(exit)} on EOF; stderr:\n${this.stderr}`);
    }
    this.assertClean();
  }

  /** stdout: only whole JSON-RPC responses (or batches of them); stderr and stdout: no secrets. */
  assertClean(): void {
    if (this.partial !== '') throw new Error(`stdout ended with a partial line: ${this.partial.slice(0, 200)}`);
    for (const line of this.lines) {
      const value = JSON.parse(line) as unknown;
      if (Array.isArray(value)) value.forEach(asResponse);
      else asResponse(value);
    }
    for (const secret of [TOKEN, API_KEY, 'SECRET-token', 'SECRET-apikey']) {
      if (this.stderr.includes(secret)) throw new Error('stderr shows a secret');
      if (this.lines.some((l) => l.includes(secret))) throw new Error('stdout shows a secret');
    }
  }
}
