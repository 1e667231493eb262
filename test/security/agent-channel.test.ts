/**
 * The agent channel, attacked from both ends (DESIGN §7: the sandbox agent is untrusted from the
 * executor's side and out of the commands' reach).
 *
 * From inside (bwrap, docker): a tenant's command tries to take the channel between the executor
 * and its sandbox agent — list and open the agent's and the sandbox init's descriptors through
 * /proc and write forged replies into them, read their environment and memory, and take their
 * descriptors with pidfd_getfd (perl's syscall). Each attempt is a
 * probe: refused when the kernel says no, leaked when it succeeds or a forged reply reaches any
 * caller. Afterwards the attacker's sandbox and another tenant's must both still serve.
 *
 * From the agent's side (a test-substituted agent, fixtures/hostile-agent.js, in a TenantPool
 * beside a real agent for another tenant): a giant frame, millions of tiny values, an unsolicited
 * reply, a second reply, a line that is not JSON, a result that is not a tool result, a request of
 * its own, a malformed progress or process-ended notification. Each must fail only the hostile tenant's call, with a clear error, end its sandbox, and
 * leave the other tenant's calls (made at the same time) answered.
 *
 * `none` has no wall: its agent runs as the server's own user and a command can reach it; the
 * README says so, and `none` serves one identity only (none-single-identity.test.ts).
 */
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pino from 'pino';
import { AgentProcess } from '../../executor/sandbox/agent-process';
import type { Sandbox, SandboxBackend, SandboxSpec } from '../../executor/sandbox/backend';
import { bwrapBackend } from '../../executor/sandbox/bwrap';
import { callParsing } from '../../executor/sandbox/sandbox-tools';
import { noneBackend } from '../../executor/sandbox/none';
import { tenantUid } from '../../executor/tenant-names';
import { TenantPool } from '../../executor/tenant-pool';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { ErrorCode } from '../../shared/protocol/errors';
import type { ToolResult } from '../../shared/tools/tool';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, SANDBOX_IMAGE } from '../helpers/docker';
import { parsingBackend } from '../helpers/parsing';
import { tally } from './tally';

const never = () => new AbortController().signal;
const HOSTILE_AGENT = path.join(__dirname, 'fixtures', 'hostile-agent.js');
const FORGED = 'FORGED-REPLY';

/**
 * Run inside the sandbox by node: finds the agent (a node whose command line runs agent/main.js,
 * not pid 1) and attacks it and pid 1 through /proc. Prints {agent, attempts}.
 */
const PROC_PROBE = `
const fs = require('fs');
const cmd = (p) => { try { return fs.readFileSync('/proc/' + p + '/cmdline', 'latin1').split('\\0'); } catch { return []; } };
const agent = fs.readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p) && p !== '1')
  .find((p) => { const c = cmd(p); return /node$/.test(c[0] || '') && c.some((a) => a.endsWith('agent/main.js')); });
const forged = (id) => JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: '${FORGED}' }] } }) + '\\n';
const attempts = [];
for (const pid of [agent, '1'].filter(Boolean)) {
  const t = (what, f) => { try { f(); attempts.push({ what: what + ' (pid ' + pid + ')', ok: true }); } catch (e) { attempts.push({ what: what + ' (pid ' + pid + ')', ok: false, error: e.code }); } };
  t('list /proc/PID/fd', () => fs.readdirSync('/proc/' + pid + '/fd'));
  for (const fd of [0, 1, 2]) t('open /proc/PID/fd/' + fd + ' and write forged replies', () => {
    const f = fs.openSync('/proc/' + pid + '/fd/' + fd, 'w');
    for (let id = 1; id < 64; id++) fs.writeSync(f, forged(id));
    fs.closeSync(f);
  });
  t('read /proc/PID/environ', () => { if (fs.readFileSync('/proc/' + pid + '/environ').length === 0) throw Object.assign(new Error('empty'), { code: 'EMPTY' }); });
  t('open /proc/PID/mem', () => fs.closeSync(fs.openSync('/proc/' + pid + '/mem', 'r')));
}
console.log(JSON.stringify({ agent, attempts }));
`;

/**
 * pidfd_open + pidfd_getfd on each pid given, in perl (perl-base is in every Debian, the sandbox
 * image included; its `syscall` needs no module), writing a forged reply into whatever it gets.
 * Prints one JSON attempt per line.
 */
const PIDFD_PROBE = `
my $forged = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"${FORGED}"}]}}' . "\\n";
for my $pid (@ARGV) {
  my $p = syscall(434, $pid + 0, 0);
  if ($p < 0) { print "{\\"what\\":\\"pidfd_open (pid $pid)\\",\\"ok\\":false,\\"error\\":\\"$!\\"}\\n"; next; }
  for my $fd (0, 1, 2) {
    my $got = syscall(438, $p, $fd, 0);
    if ($got >= 0) { open(my $fh, ">&=", $got) and syswrite($fh, $forged); }
    my $ok = $got >= 0 ? "true" : "false";
    print "{\\"what\\":\\"pidfd_getfd fd $fd (pid $pid)\\",\\"ok\\":$ok,\\"error\\":\\"$!\\"}\\n";
  }
}
`;

interface Attempt {
  what: string;
  ok: boolean;
  error?: string;
}

interface InsideCase {
  name: 'bwrap' | 'docker';
  available: boolean;
  reason: string;
  backend(): SandboxBackend;
  setup?: () => Promise<void>;
}

const cases: InsideCase[] = [
  {
    name: 'bwrap',
    available: hasCommand('bwrap') && isRoot,
    reason: 'needs bubblewrap (apt-get install bubblewrap) and root',
    backend: () => bwrapBackend(),
  },
  {
    name: 'docker',
    available: dockerUnavailable === undefined,
    reason: dockerUnavailable ?? '',
    backend: () => {
      // Loaded only here: dockerode is slow to load and absent from the other cases.
      const { dockerBackend } = require('../../executor/sandbox/docker/backend') as typeof import('../../executor/sandbox/docker/backend');
      return dockerBackend({ image: SANDBOX_IMAGE, executorId: `agent-channel-${process.pid}` });
    },
    setup: () => ensureSandboxImage(),
  },
];

const stdoutOf = (r: ToolResult) => String((r.structuredContent as { stdout?: string } | undefined)?.stdout ?? '');

for (const c of cases) {
  const set = `agent-channel[${c.name}]`;
  describeIf(c.available, c.reason, `agent channel: a command cannot take it (${c.name})`, () => {
    let root: string;
    const sandboxes: Record<'attacker' | 'bystander', Sandbox | undefined> = { attacker: undefined, bystander: undefined };
    const seen: ToolResult[] = [];
    const callIn = async (who: 'attacker' | 'bystander', tool: string, args: unknown) => {
      const r = await callParsing(sandboxes[who]!, tool, args, never());
      seen.push(r);
      return r;
    };

    beforeAll(async () => {
      await c.setup?.();
      root = await fs.mkdtemp(path.join(os.tmpdir(), `tg-channel-${c.name}-`));
      await fs.chmod(root, 0o711);
      for (const who of ['attacker', 'bystander'] as const) {
        const uid = tenantUid(`agent-channel-${c.name}-${who}`);
        const workspace = path.join(root, who);
        await fs.mkdir(workspace, { mode: 0o700 });
        await fs.chown(workspace, uid, uid);
        sandboxes[who] = await c.backend().start({ workspace, limits: DEFAULT_LIMITS, tenant: `agent-channel-${who}`, uid });
      }
      await callIn('bystander', 'write_file', { path: 'hello.txt', content: 'hello' });
    }, 240_000);
    afterAll(async () => {
      await Promise.all(Object.values(sandboxes).map((s) => s?.stop()));
      if (root) await fs.rm(root, { recursive: true, force: true });
    });

    it("cannot list, open, read or write the agent's or the init's descriptors through /proc", async () => {
      await callIn('attacker', 'write_file', { path: 'probe.js', content: PROC_PROBE });
      const r = await callIn('attacker', 'run_command', { command: 'node probe.js', timeout_ms: 20_000 });
      const { agent, attempts } = JSON.parse(stdoutOf(r)) as { agent?: string; attempts: Attempt[] };
      expect(agent).toBeDefined(); // the probe found its target: a probe without one proves nothing
      expect(attempts.length).toBe(12);
      for (const a of attempts) tally.probe(set, !a.ok, a.ok);
      expect(attempts.filter((a) => a.ok)).toEqual([]);
    }, 60_000);

    it('cannot take their descriptors with pidfd_getfd', async () => {
      await callIn('attacker', 'write_file', { path: 'pidfd.pl', content: PIDFD_PROBE });
      const find = await callIn('attacker', 'run_command', {
        command: `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^[^ ]*node .*agent/main[.]js' && echo \${p#/proc/}; done`,
      });
      const pids = stdoutOf(find).split('\n').filter(Boolean);
      expect(pids.length).toBeGreaterThan(0);
      const r = await callIn('attacker', 'run_command', { command: `perl pidfd.pl ${pids.join(' ')} 1`, timeout_ms: 20_000 });
      const attempts = stdoutOf(r)
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Attempt);
      const getfd = attempts.filter((a) => a.what.startsWith('pidfd_getfd'));
      expect(getfd.length).toBe(3 * (pids.length + 1)); // pidfd_open itself needs no permission: every target was reached
      for (const a of getfd) tally.probe(set, !a.ok, a.ok);
      expect(attempts.filter((a) => a.ok)).toEqual([]);
    }, 60_000);

    it('leaves both tenants served and no forged reply taken', async () => {
      const a = await callIn('attacker', 'run_command', { command: 'echo still-mine' });
      const b = await callIn('bystander', 'read_file', { path: 'hello.txt' });
      expect(stdoutOf(a)).toBe('still-mine\n');
      expect(b.structuredContent?.content).toBe('hello');
      const forged = seen.some((r) => JSON.stringify(r).includes(FORGED) && !JSON.stringify(r).includes('probe'));
      tally.probe(set, !forged && sandboxes.attacker!.alive && sandboxes.bystander!.alive, forged);
      expect(forged).toBe(false);
    }, 30_000);
  });
}

describe('agent channel: a misbehaving agent ends only its own sandbox', () => {
  const set = 'agent-channel[misbehaving-agent]';
  let dataDir: string;
  let pool: TenantPool;
  const none = parsingBackend(noneBackend());
  const mixed: SandboxBackend = {
    name: 'mixed',
    isolating: false,
    start: (spec: SandboxSpec) =>
      spec.tenant.startsWith('mallory-')
        ? AgentProcess.start({ file: process.execPath, args: [HOSTILE_AGENT, spec.tenant.slice('mallory-'.length)], env: { PATH: '/usr/bin:/bin' } }, spec, {
            startTimeoutMs: 10_000,
          })
        : none.start(spec),
  };

  beforeAll(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-channel-agent-'));
    pool = new TenantPool({
      backend: mixed,
      dataDir,
      limits: DEFAULT_LIMITS,
      idleMs: 60_000,
      maxSandboxes: 32,
      publish: () => undefined,
      log: pino({ level: 'silent' }),
    });
    await fs.mkdir(path.join(dataDir, 'workspaces'), { recursive: true });
    await pool.call('alice', 'write_file', { path: 'hello.txt', content: 'hello' }, never());
  });
  afterAll(async () => {
    await pool?.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  const refusals: Array<[mode: string, what: RegExp]> = [
    ['giant', /larger than \d+ bytes/],
    ['many-values', /more than \d+ values/],
    ['unsolicited', /reply to no pending call/],
    ['not-json', /not valid JSON/],
    ['not-result', /not a tool result/],
    ['request', /something other than a JSON-RPC reply/],
    ['bad-progress', /malformed progress notification/],
    ['bad-ended', /malformed process-ended notification/],
  ];

  it.each(refusals)(
    '%s: fails the hostile call with a clear error and ends that sandbox; the other tenant is served meanwhile',
    async (mode, what) => {
      const delay = monitorEventLoopDelay({ resolution: 10 });
      delay.enable();
      const meanwhile = Array.from({ length: 20 }, () => pool.call('alice', 'read_file', { path: 'hello.txt' }, never()));
      const attack = pool.call(`mallory-${mode}`, 'list_directory', {}, never());
      const outcome = await attack.then(
        (r) => ({ result: r, error: undefined }),
        (err: { code?: number; message?: string }) => ({ result: undefined, error: err }),
      );
      const bystander = await Promise.allSettled(meanwhile);
      delay.disable();
      const after = await pool.call('alice', 'read_file', { path: 'hello.txt' }, never());

      const servedAll =
        bystander.every((s) => s.status === 'fulfilled' && s.value.structuredContent?.content === 'hello') && after.structuredContent?.content === 'hello';
      const refused =
        // The call had reached the agent: it may have run, so its outcome is unknown (never "safe to retry").
        outcome.error?.code === ErrorCode.OutcomeUnknown &&
        /broke the executor's protocol/.test(outcome.error.message ?? '') &&
        what.test(outcome.error.message ?? '');
      const leaked = outcome.result !== undefined || !servedAll;
      tally.probe(set, refused && servedAll, leaked);
      expect(outcome.error).toMatchObject({ code: ErrorCode.OutcomeUnknown, message: expect.stringMatching(what) });
      expect(servedAll).toBe(true);
      // Ended: the hostile tenant's sandbox is gone, and its next call starts a new one (which misbehaves again).
      // Unavailable when the new agent broke the protocol before the call reached it, OutcomeUnknown
      // when after: the two answers of a sandbox that ends, never a result.
      const next = await pool.call(`mallory-${mode}`, 'list_directory', {}, never()).then(
        () => undefined,
        (err: { code?: number }) => err.code,
      );
      expect([ErrorCode.Unavailable, ErrorCode.OutcomeUnknown]).toContain(next);
      // For the record, not a pass mark (load on a shared machine moves it): how long the event loop stalled.
      process.stdout.write(`(${set} ${mode}: event loop delay max ${(delay.max / 1e6).toFixed(1)} ms)\n`);
    },
    60_000,
  );

  it('duplicate: the first reply answers the call, the second ends the sandbox', async () => {
    const workspace = path.join(dataDir, 'dup');
    await fs.mkdir(workspace);
    const spec = { workspace, limits: DEFAULT_LIMITS, tenant: 'mallory-duplicate' };
    const agent = await AgentProcess.start({ file: process.execPath, args: [HOSTILE_AGENT, 'duplicate'], env: { PATH: '/usr/bin:/bin' } }, spec, {
      startTimeoutMs: 10_000,
    });
    const r = await agent.call('list_directory', {}, never());
    expect(r.content).toEqual([{ type: 'text', text: 'fine' }]);
    const reason = await agent.exited;
    const ended = /broke the executor's protocol \(it sent a reply to no pending call \(id \d+\): unsolicited, or a second reply\)/.test(reason);
    tally.probe(set, ended, false);
    expect(reason).toMatch(/second reply/);
    expect(agent.alive).toBe(false);
  }, 30_000);

  it('well-behaved (control): the same agent answering properly stays in service', async () => {
    const r = await pool.call('mallory-well', 'list_directory', {}, never());
    expect(r.content).toEqual([{ type: 'text', text: 'fine' }]);
    expect((await pool.call('mallory-well', 'list_directory', {}, never())).content).toEqual([{ type: 'text', text: 'fine' }]);
  });

  it('takes the largest reply the limits allow: a full read_file of control characters', async () => {
    // Each byte travels as \u00XX (6 bytes), in content and in structuredContent: the worst case the cap allows for.
    await fs.writeFile(path.join(pool.workspaceFor('alice'), 'controls.bin'), Buffer.alloc(DEFAULT_LIMITS.maxReadBytes, 1));
    const r = await pool.call('alice', 'read_file', { path: 'controls.bin', encoding: 'utf8' }, never());
    expect(r.isError).toBeFalsy();
    expect(String(r.structuredContent?.content).length).toBe(DEFAULT_LIMITS.maxReadBytes);
    // JSON's own punctuation inside strings is text, not values: the value count must not trip on it.
    const punctuation = '[{,"\\}],'.repeat(DEFAULT_LIMITS.maxReadBytes / 8);
    await fs.writeFile(path.join(pool.workspaceFor('alice'), 'punctuation.txt'), punctuation);
    const p = await pool.call('alice', 'read_file', { path: 'punctuation.txt' }, never());
    expect(p.isError).toBeFalsy();
    expect(p.structuredContent?.content).toBe(punctuation);
  }, 30_000);
});
