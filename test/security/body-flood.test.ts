/**
 * The body flood (issue 12): one identity posts 16 large bodies at once — `[{},{},…]` element
 * floods and strings just under the size limit, and 64 MiB bodies far over it — from a process
 * of its own, while this test keeps calling tools/list as another identity. The gateway is the
 * real `toolgate serve` (embedded executor; and on BullMQ with a `toolgate executor`), defaults
 * as shipped (8 MiB bodies, 32 MiB in flight per identity, 100000 elements).
 *
 * Each flood body is a probe: refused when the gateway answered it with a readable HTTP reply
 * (413, 429, or 200: the -32600 element refusal, or served — contained), leaked when the
 * flooder got a connection reset instead, or the quiet identity was refused or stalled past
 * QUIET_BOUND_MS meanwhile.
 *
 *   ATTACK SUMMARY body-flood[serve]: 48 probes, 48 refused, 0 leaked
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { baseEnv, freePort, Service, startService, waitForHttp } from '../../bench/lib/services';
import { PERMISSIONS } from '../../shared/auth/permissions';
import { signToken } from '../../shared/auth/token';
import { hasCommand, isRoot } from '../helpers/availability';
import { unmountUnder } from '../helpers/mounts';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { tally } from './tally';

const run = promisify(execFile);
const BIN = path.resolve(__dirname, '../../dist/bin/toolgate.js');
const CLIENT = path.join(__dirname, 'fixtures/flood-client.js');
const MIB = 1024 * 1024;
const LIMIT = 8 * MIB; // TOOLGATE_MAX_MESSAGE_BYTES as shipped
const FLOOD = 16;
/**
 * The quiet identity's worst tools/list during a flood. Generous for a loaded 2-core machine:
 * the point is seconds at worst, not the minutes an unbounded flood took (147 s before the fix).
 * The measured figures are printed.
 */
const QUIET_BOUND_MS = 5000;
const SANDBOX = hasCommand('bwrap') && isRoot ? 'bwrap' : 'none';

interface Answer {
  status: number | 'reset';
  code?: number;
  error?: string;
  ms: number;
}

async function post(url: string, token: string, body: string): Promise<Answer> {
  const started = performance.now();
  try {
    const res = await fetch(url, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body });
    await res.text();
    return { status: res.status, ms: performance.now() - started };
  } catch {
    return { status: 'reset', ms: performance.now() - started };
  }
}

interface Stack {
  url: string;
  token(id: string): string;
  close(): Promise<void>;
}

async function startStack(redis: TestRedis | undefined): Promise<Stack> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-body-flood-'));
  const secret = randomBytes(32).toString('base64url');
  const port = await freePort();
  const env = baseEnv({
    TOOLGATE_DATA_DIR: dataDir,
    TOOLGATE_JWT_SECRET: secret,
    TOOLGATE_SANDBOX: SANDBOX,
    TOOLGATE_PORT: String(port),
    TOOLGATE_LOG_LEVEL: 'warn',
    TOOLGATE_EXECUTOR_ID: `body-flood-${process.pid}`,
  });
  if (redis) env.TOOLGATE_REDIS_URL = redis.url;
  const services: Service[] = [];
  const close = async () => {
    for (const s of services.reverse()) await s.stop();
    await unmountUnder(dataDir);
    await fs.rm(dataDir, { recursive: true, force: true });
  };
  try {
    if (redis) services.push(startService('toolgate executor', process.execPath, [BIN, 'executor'], env));
    const gateway = startService('toolgate serve', process.execPath, [BIN, 'serve'], env);
    services.push(gateway);
    await waitForHttp(gateway, `http://127.0.0.1:${port}/${redis ? 'readyz' : 'healthz'}`);
  } catch (err) {
    await close();
    throw err;
  }
  const token = (id: string) => {
    const iat = Math.floor(Date.now() / 1000);
    return signToken({ id, permissions: [...PERMISSIONS], iat, exp: iat + 3600 }, secret);
  };
  return { url: `http://127.0.0.1:${port}/`, token, close };
}

function floodSet(setup: 'serve' | 'serve+executor[bullmq]'): void {
  const set = `body-flood[${setup}]`;
  let redis: TestRedis | undefined;
  let stack: Stack;
  beforeAll(async () => {
    if (setup !== 'serve') redis = await startRedis();
    stack = await startStack(redis);
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
    await redis?.close();
  });

  for (const kind of ['elements', 'bytes', 'oversize']) {
    test(`${FLOOD} concurrent ${kind} bodies from one identity: each answered, and another identity served meanwhile`, async () => {
      const quietToken = stack.token(`quiet-${kind}`);
      const attacker = stack.token(`flooder-${kind}`);
      const quiet: Answer[] = [];
      let flooding = true;
      const quietLoop = (async () => {
        while (flooding) {
          quiet.push(await post(stack.url, quietToken, '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'));
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      const { stdout } = await run(process.execPath, [CLIENT, stack.url, attacker, kind, String(FLOOD), String(LIMIT)], { maxBuffer: 16 * MIB }).finally(() => {
        flooding = false;
      });
      await quietLoop;
      const answers = JSON.parse(stdout) as Answer[];

      const worst = Math.max(...quiet.map((q) => q.ms));
      const quietOk = quiet.length > 0 && quiet.every((q) => q.status === 200) && worst < QUIET_BOUND_MS;
      for (const a of answers) {
        const answered = a.status === 413 || a.status === 429 || a.status === 200;
        tally.probe(set, answered, !answered || !quietOk);
      }
      const statuses: Record<string, number> = {};
      for (const a of answers) statuses[`${a.status}${a.code ? `/${a.code}` : ''}`] = (statuses[`${a.status}${a.code ? `/${a.code}` : ''}`] ?? 0) + 1;
      const sorted = quiet.map((q) => q.ms).sort((a, b) => a - b);
      process.stdout.write(
        `${set} ${kind}: flood ${JSON.stringify(statuses)}, slowest ${Math.round(Math.max(...answers.map((a) => a.ms)))} ms; ` +
          `quiet tools/list n=${quiet.length} p50=${Math.round(sorted[Math.floor(sorted.length / 2)] ?? NaN)} ms max=${Math.round(worst)} ms\n`,
      );

      expect(answers).toHaveLength(FLOOD);
      expect(answers.filter((a) => a.status === 'reset')).toEqual([]);
      if (kind === 'elements') expect(answers.map((a) => a.code)).toEqual(Array(FLOOD).fill(-32600)); // more than 100000 elements, unparsed
      if (kind === 'oversize') expect(answers.map((a) => a.status)).toEqual(Array(FLOOD).fill(413));
      if (kind === 'bytes') expect(answers.filter((a) => a.status === 429).length).toBeGreaterThan(0); // 32 MiB in flight holds 4 of 7 MiB
      expect(quiet.filter((q) => q.status !== 200)).toEqual([]);
      expect(worst).toBeLessThan(QUIET_BOUND_MS);
      // The flooder is not locked out afterwards: its budget came back.
      expect((await post(stack.url, attacker, '{"jsonrpc":"2.0","id":3,"method":"tools/list"}')).status).toBe(200);
    }, 180_000);
  }
}

describe('body flood: toolgate serve', () => floodSet('serve'));
describeRedis('body flood: toolgate serve + toolgate executor on BullMQ', () => floodSet('serve+executor[bullmq]'));
