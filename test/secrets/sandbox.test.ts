/**
 * Credential brokering as a tenant's commands meet it, in a real bwrap or docker sandbox behind
 * a real executor: the sandbox sees only the placeholder (its environment, its files), curl inside it
 * sends `$GH_TOKEN` to an HTTPS host that has the secret and the server receives the real value
 * (TLS intercepted with the executor's CA, which the sandbox trusts through the usual variables),
 * another host receives the placeholder as written, and the value never reaches a tool result nor
 * the memory of any process of the sandbox (read from the host while a request is in flight).
 * Node's fetch does the same over http:// (which it tunnels through CONNECT) and https://.
 * Destinations on loopback only: names pinned with TOOLGATE_EGRESS_RESOLVE; the upstream server
 * has its own CA, trusted by the proxy through TOOLGATE_EGRESS_CA_FILE.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { Executor, startExecutor } from '../../executor/executor';
import { fileSecretBackend } from '../../executor/secrets/backends';
import type { CertificateAuthority } from '../../executor/secrets/ca';
import { createSecretStore } from '../../executor/secrets/store';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage } from '../helpers/docker';
import { call, CapturingBus, capturedLogger, testConfig, text } from '../executor/helpers';
import { pidsOfUid, scanProcesses } from '../helpers/process-memory';
import { makeRepo, serveGit } from './git-backend';
import { Origins, startOrigins } from './origins';

const KEY = randomBytes(32).toString('hex');
const TOKEN = 'ghs_' + randomBytes(20).toString('hex');
/** The Git host's password for `user` (the README's worked example: a token in the clone URL). */
const GIT_PASS = 'gitp_' + randomBytes(16).toString('hex');

interface Ran {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

const backends: Array<{ name: 'bwrap' | 'docker'; why: string | undefined }> = [
  { name: 'bwrap', why: hasCommand('bwrap') && isRoot ? undefined : 'needs bubblewrap and root' },
  { name: 'docker', why: dockerUnavailable },
];

for (const { name, why } of backends) {
  describeIf(why === undefined && hasCommand('curl'), why ?? 'needs curl on the host (the test servers) ', `secrets in a ${name} sandbox`, () => {
    let dir: string;
    let bus: CapturingBus;
    let executor: Executor;
    /** The upstream over HTTPS (`port`, its own CA) and the same handler in the clear (`plainPort`: Node's fetch tunnels http:// through CONNECT too). */
    let origins: Origins;
    let upstreamCa: CertificateAuthority;
    let port: number;
    let plainPort: number;
    const seen: Array<{ host: string; authorization: string | undefined }> = [];
    /** `/hold` answers only when released: the request stays in flight while the test looks. */
    let hold: { arrived: () => void; released: Promise<void> } | undefined;
    const logged = capturedLogger();

    const run = async (command: string): Promise<Ran> => {
      const r = await call(bus, 'alice', 'run_command', { command, timeout_ms: 20_000 });
      expect(text(r)).not.toContain(TOKEN);
      if (r.isError) throw new Error(`run_command failed: ${text(r)}`);
      return r.structuredContent as unknown as Ran;
    };

    beforeAll(async () => {
      if (name === 'docker') await ensureSandboxImage();
      dir = await fs.mkdtemp(path.join(os.tmpdir(), `tg-secrets-${name}-`));
      await fs.chmod(dir, 0o755); // sandbox uids reach their workspaces below it
      await makeRepo(path.join(dir, 'git'));
      const handler: http.RequestListener = (req, res) => {
        seen.push({ host: String(req.headers.host), authorization: req.headers.authorization });
        if (req.url?.startsWith('/repo.git/')) return serveGit(path.join(dir, 'git'), GIT_PASS, req, res);
        if (req.url === '/hold' && hold) {
          hold.arrived();
          void hold.released.then(() => res.end('ok\n'));
          return;
        }
        // /echo hands the credential back, as a careless API would: the sandbox must see the name only.
        res.end(req.url === '/echo' ? `got ${req.headers.authorization ?? ''}\n` : 'ok\n');
      };
      origins = await startOrigins(dir, handler);
      ({ ca: upstreamCa, tlsPort: port, plainPort } = origins);
      const data = path.join(dir, 'data');
      const store = createSecretStore(fileSecretBackend(data), KEY);
      await store.set('alice', { name: 'GH_TOKEN', host: `api.git.test:${port},api.git.test:${plainPort}`, value: TOKEN });
      await store.set('alice', { name: 'GIT_PASS', host: `api.git.test:${port}`, value: GIT_PASS });
      bus = new CapturingBus();
      executor = await startExecutor({
        config: testConfig(data, {
          TOOLGATE_SANDBOX: name,
          TOOLGATE_SECRETS_KEY: KEY,
          TOOLGATE_EGRESS_CA_FILE: upstreamCa.certFile,
          TOOLGATE_EGRESS_RESOLVE: 'api.git.test=127.0.0.1,other.test=127.0.0.1',
          TOOLGATE_EGRESS_ALLOW: `api.git.test:${port},api.git.test:${plainPort},other.test:${port}`,
          // http_request under egress: a pinned name on a private address needs the SSRF guard's exception too.
          TOOLGATE_HTTP_ALLOW: `api.git.test:${port}`,
        }),
        bus,
        log: logged.log,
      });
    }, 240_000);

    afterAll(async () => {
      await executor?.close();
      await bus?.close();
      await origins?.close();
      await fs.rm(dir, { recursive: true, force: true });
    });

    it('shows the sandbox only the placeholder, in its environment and its files', async () => {
      const r = await run('echo "GH_TOKEN=$GH_TOKEN"; env | grep -c ghs_ || true; grep -rl ghs_ /run/toolgate . 2>/dev/null | wc -l');
      expect(r.stdout.split('\n')[0]).toBe('GH_TOKEN={{secret:GH_TOKEN}}');
      expect(r.stdout.split('\n')[1]).toBe('0');
      expect(r.stdout.split('\n')[2]).toBe('0');
      expect(r.stdout).not.toContain(TOKEN);
    }, 60_000);

    it("sends the real value to the secret's host over HTTPS, trusting the executor's CA by the usual variables", async () => {
      seen.length = 0;
      const r = await run(`curl -sS --max-time 10 -H "Authorization: Bearer $GH_TOKEN" https://api.git.test:${port}/user`);
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toBe('ok\n');
      expect(seen).toEqual([{ host: `api.git.test:${port}`, authorization: `Bearer ${TOKEN}` }]);
      expect(JSON.stringify(logged.lines)).not.toContain(TOKEN);
      // The use is on record (audit line and bus event), by name, never by value.
      expect(logged.lines).toContainEqual(
        expect.objectContaining({ event: 'secret.used', identity: 'alice', secret: 'GH_TOKEN', host: 'api.git.test', tool: 'egress' }),
      );
      expect(bus.events.filter((e) => e.type === 'secret.used')).toContainEqual(expect.objectContaining({ tenant: 'alice', name: 'GH_TOKEN' }));
    }, 60_000);

    it.each(['http', 'https'])(
      "sends the real value with Node's fetch to the secret's host over %s, and shows the sandbox only its name",
      async (scheme) => {
        seen.length = 0;
        const url = `${scheme}://api.git.test:${scheme === 'http' ? plainPort : port}/echo`;
        const script = `fetch("${url}", { headers: { authorization: "Bearer " + process.env.GH_TOKEN } }).then(async (r) => console.log(r.status, await r.text()))`;
        const r = await run(`node -e '${script}' 2>&1`);
        expect(r).toMatchObject({ exitCode: 0, stdout: '200 got Bearer [secret:GH_TOKEN]\n\n' });
        expect(seen).toEqual([{ host: new URL(url).host, authorization: `Bearer ${TOKEN}` }]);
      },
      60_000,
    );

    it("http_request in this executor trusts the host's own CA through TOOLGATE_EGRESS_CA_FILE and sends it the value", async () => {
      seen.length = 0;
      const r = await call(bus, 'alice', 'http_request', { url: `https://api.git.test:${port}/api`, headers: { Authorization: 'Bearer {{secret:GH_TOKEN}}' } });
      expect(r.isError).toBeUndefined();
      expect(r.structuredContent).toMatchObject({ status: 200, body: 'ok\n' });
      expect(seen).toEqual([{ host: `api.git.test:${port}`, authorization: `Bearer ${TOKEN}` }]);
      expect(text(r)).not.toContain(TOKEN);
    }, 60_000);

    it('trusts the same bundle where tools read no variable (the system bundle)', async () => {
      seen.length = 0;
      const r = await run(
        `env -u SSL_CERT_FILE -u CURL_CA_BUNDLE curl -sS --max-time 10 -H "Authorization: Bearer $GH_TOKEN" https://api.git.test:${port}/sys`,
      );
      expect(r.exitCode).toBe(0);
      expect(seen).toEqual([{ host: `api.git.test:${port}`, authorization: `Bearer ${TOKEN}` }]);
    }, 60_000);

    it('leaves the value out of the memory of every process of the sandbox while a request with it is in flight', async () => {
      const uid = Number((await run('id -u')).stdout.trim());
      let release!: () => void;
      const arrived = new Promise<void>((resolve) => (hold = { arrived: resolve, released: new Promise<void>((r) => (release = r)) }));
      const pending = run(`curl -sS --max-time 30 -H "Authorization: Bearer $GH_TOKEN" https://api.git.test:${port}/hold`);
      await arrived; // the server holds the real value now: the proxy has swapped it in
      const scanned = await scanProcesses(await pidsOfUid(uid), [TOKEN, '{{secret:GH_TOKEN}}']);
      release();
      expect((await pending).exitCode).toBe(0);
      hold = undefined;
      // The scan read curl itself (and found its placeholder there: a scan that reads nothing cannot pass) and the agent.
      const curl = scanned.filter((p) => p.command.startsWith('curl '));
      expect(curl).toHaveLength(1);
      expect(curl[0]!.holds[1]).toBe(true);
      expect(scanned.some((p) => p.command.includes('agent'))).toBe(true);
      expect(scanned.filter((p) => p.holds[0]).map((p) => p.command)).toEqual([]);
    }, 60_000);

    it('clones with git from https://user:$GIT_PASS@host/: the server gets the password, the clone keeps the placeholder', async () => {
      const r = await run(
        `git clone -q "https://user:$GIT_PASS@api.git.test:${port}/repo.git" cloned 2>&1 && cat cloned/README && git -C cloned remote get-url origin`,
      );
      expect(r).toMatchObject({ exitCode: 0, stdout: `hello from the test repo\nhttps://user:{{secret:GIT_PASS}}@api.git.test:${port}/repo.git\n` });
      expect(r.stdout + r.stderr).not.toContain(GIT_PASS);
      const grep = await run(`grep -rlF '${GIT_PASS.slice(0, 12)}' cloned | wc -l`);
      expect(grep.stdout.trim()).toBe('0');
      expect(JSON.stringify(logged.lines)).not.toContain(GIT_PASS);
      expect(bus.events.filter((e) => e.type === 'secret.used')).toContainEqual(expect.objectContaining({ tenant: 'alice', name: 'GIT_PASS' }));
    }, 60_000);

    it('sends another host the placeholder as written, never the value', async () => {
      seen.length = 0;
      const r = await run(`curl -sS --max-time 10 -H "Authorization: Bearer $GH_TOKEN" https://other.test:${port}/ -k`); // no secret there: an end-to-end tunnel to a server the sandbox cannot verify
      expect(r.exitCode).toBe(0);
      expect(seen).toEqual([{ host: `other.test:${port}`, authorization: 'Bearer {{secret:GH_TOKEN}}' }]);
    }, 60_000);
  });
}
