/**
 * Governed egress end to end, as a tenant meets it, for each isolating backend: an executor, tool
 * calls through the bus, real programs (curl, git, npm) inside real sandboxes, and destinations on
 * loopback only, reached through names pinned with TOOLGATE_EGRESS_RESOLVE. Policies are set the
 * way an operator sets them (`toolgate egress set`, in the data directory) while the executor runs.
 */
import { promises as fs } from 'node:fs';
import { promises as dns } from 'node:dns';
import * as os from 'node:os';
import * as path from 'node:path';
import { runEgress } from '../../bin/commands/egress';
import { Executor, startExecutor } from '../../executor/executor';
import type { Config } from '../../shared/config';
import { classifyAddress } from '../../shared/tools/http/address-class';
import { call, CapturingBus, capturedLogger, testConfig, text } from '../executor/helpers';
import { itIf } from '../helpers/availability';
import { startServers, Servers } from './harness';
import { Origin, startOrigin } from './origin';

interface Ran {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

export interface EgressSuiteOptions {
  /** TOOLGATE_SANDBOX and whatever else the backend needs. */
  env: Record<string, string>;
  /** Connections the flooding tenant opens at once (a sandbox's process and memory limits bound it). */
  flood: number;
  /**
   * Whether the sandbox runs Python with requests and pip (bwrap: the host's /usr; the docker
   * image carries no Python): 'no' for a backend without it, else undefined or why it is missing here.
   */
  python: 'no' | { missing: string | undefined };
}

export function sandboxEgressSuite(options: EgressSuiteOptions): void {
  let dir: string;
  let bus: CapturingBus;
  let executor: Executor;
  let config: Readonly<Config>;
  let origin: Origin;
  let servers: Servers;
  const logged = capturedLogger();
  let O: number; // the origin's port

  const run = async (tenant: string, command: string, timeoutMs = 20_000): Promise<Ran> => {
    const r = await call(bus, tenant, 'run_command', { command, timeout_ms: timeoutMs });
    if (r.isError) throw new Error(`run_command failed: ${text(r)}`);
    return r.structuredContent as unknown as Ran;
  };
  /** `toolgate egress …` as an operator runs it against the running executor's data directory (its stdout kept quiet). */
  const egress = async (...argv: string[]) => {
    const quiet = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      return await runEgress(argv, config, logged.log);
    } finally {
      quiet.mockRestore();
    }
  };

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-egb-'));
    await fs.chmod(dir, 0o755); // sandbox uids reach their workspaces below it
    origin = await startOrigin(dir, 'registry.test');
    servers = await startServers(dir);
    O = origin.port;
    config = testConfig(path.join(dir, 'data'), {
      ...options.env,
      TOOLGATE_EGRESS_RESOLVE: 'registry.test=127.0.0.1,secure.test=127.0.0.1,pkg.mirror.test=127.0.0.1,mirror.test=127.0.0.1,mirror.test.evil.test=127.0.0.1',
      // http_request: the SSRF guard lets it reach loopback only where the operator says so.
      TOOLGATE_HTTP_ALLOW: '127.0.0.1/32',
      TOOLGATE_EGRESS_MAX_CONNECTIONS: '8',
    });
    bus = new CapturingBus();
    executor = await startExecutor({ config, bus, log: logged.log });
    const tls = `,secure.test:${servers.tls.port}`;
    await egress('set', '--id', 'alice', '--allow', `registry.test:${O}${tls},${os.hostname()}:${O},*.mirror.test:${O}`);
  });
  afterAll(async () => {
    await executor?.close();
    // Every sandbox's channel closed with it: no socket or directory is left behind.
    if (executor) expect(await fs.readdir(path.join(config.dataDir, 'egress')).catch(() => [])).toEqual([]);
    await bus?.close();
    await origin?.close();
    await servers?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('gives commands the proxy variables and nothing else on the network', async () => {
    const r = await run('alice', 'env | grep -i _proxy | sort');
    expect(r.stdout).toContain('HTTPS_PROXY=http://127.0.0.1:3128');
    expect(r.stdout).toContain('http_proxy=http://127.0.0.1:3128');
    expect(r.stdout).toContain('NO_PROXY=localhost,127.0.0.1,::1');
  });

  it('fetches over HTTP with curl from an allowed, pinned name', async () => {
    const r = await run('alice', `curl -sS --max-time 10 http://registry.test:${O}/hello`);
    expect(r).toMatchObject({ exitCode: 0, stdout: 'hello from the origin\n' });
  });

  it('fetches over HTTPS (CONNECT) with curl, the certificate verified end to end', async () => {
    await call(bus, 'alice', 'write_file', { path: 'ca.pem', content: servers.tls.ca.toString() });
    const r = await run('alice', `curl -sS --max-time 10 --cacert ca.pem https://secure.test:${servers.tls.port}/`);
    expect(r).toMatchObject({ exitCode: 0, stdout: 'secret' });
  });

  it('clones a git repository over HTTP', async () => {
    const r = await run('alice', `git clone -q http://registry.test:${O}/git/repo.git cloned && cat cloned/README`);
    expect(r).toMatchObject({ exitCode: 0, stdout: 'hello from git\n' });
  });

  it('installs a package with npm from a registry', async () => {
    const r = await run(
      'alice',
      `npm install --registry http://registry.test:${O}/ --no-audit --no-fund --no-update-notifier --loglevel=error tiny-pkg && node -p "require('tiny-pkg')"`,
      40_000,
    );
    expect(r.stderr).toBe('');
    expect(r).toMatchObject({ exitCode: 0 });
    expect(r.stdout).toMatch(/tiny\n$/);
  });

  it("fetches with Node's own fetch, unchanged, over HTTP and HTTPS (CONNECT), with the sandbox's Node", async () => {
    const fetchScript = (url: string) => `node -e "fetch('${url}').then((r) => r.text()).then((t) => process.stdout.write(process.version + ' ' + t))"`;
    const plain = await run('alice', fetchScript(`http://registry.test:${O}/hello`));
    expect(plain).toMatchObject({ exitCode: 0, stdout: expect.stringMatching(/^v\d+\.\d+\.\d+ hello from the origin\n$/) });
    await call(bus, 'alice', 'write_file', { path: 'ca.pem', content: servers.tls.ca.toString() });
    const secure = await run('alice', `NODE_EXTRA_CA_CERTS=ca.pem ${fetchScript(`https://secure.test:${servers.tls.port}/`)}`);
    expect(secure).toMatchObject({ exitCode: 0, stdout: expect.stringMatching(/ secret$/) });
    // Refused by the policy. A Node older than 22.21/24.5 (fetch-proxy.js: http:// forwarded) gets
    // the proxy's 403 with its line; a newer one tunnels every request and its fetch fails with the 403 as the cause.
    const refused = await run(
      'alice',
      `node -e "fetch('http://elsewhere.test:${O}/').then(async (r) => console.log(r.status, await r.text()), (e) => { while (e.cause) e = e.cause; console.log('rejected:', e.message); })"`,
    );
    expect(refused.stdout).toMatch(/^(403 toolgate egress: refused elsewhere\.test:\d+: not in this tenant's policy|rejected: Proxy response \(403\))/);
  });

  if (options.python !== 'no') {
    const { missing } = options.python;
    itIf(missing === undefined, missing ?? '', 'fetches with python requests, unchanged', async () => {
      const r = await run('alice', `python3 -c "import requests; print(requests.get('http://registry.test:${O}/hello', timeout=10).text, end='')"`);
      expect(r).toMatchObject({ exitCode: 0, stdout: 'hello from the origin\n' });
    });

    itIf(missing === undefined, missing ?? '', 'installs a package with pip from an index', async () => {
      const r = await run(
        'alice',
        `python3 -m pip install -q --no-cache-dir --disable-pip-version-check --target pylib --trusted-host registry.test --index-url http://registry.test:${O}/simple/ tiny-py && PYTHONPATH=pylib python3 -c "import tiny_py; print(tiny_py.VALUE)"`,
        40_000,
      );
      expect(r).toMatchObject({ exitCode: 0, stdout: 'tiny from pypi\n' });
    });
  }

  it('shows the refusal to the agent: a host outside the policy, over HTTP and HTTPS', async () => {
    const plain = await run('alice', 'curl -sS --max-time 10 http://denied.test/');
    expect(plain.stdout).toBe("toolgate egress: refused denied.test:80: not in this tenant's policy\n");
    const secure = await run('alice', 'curl -sS --max-time 10 https://denied.test/');
    expect(secure.exitCode).not.toBe(0);
    expect(secure.stderr).toMatch(/CONNECT tunnel failed, response 403/);
    expect(bus.events).toContainEqual(expect.objectContaining({ type: 'egress.denied', tenant: 'alice', host: 'denied.test', port: 443 }));
  });

  it('refuses a private address behind an allowed name (not pinned)', async () => {
    const name = os.hostname();
    const { address } = await dns.lookup(name).catch(() => ({ address: '' }));
    if (!address || classifyAddress(address) === undefined) return console.warn(`skipped: ${name} does not resolve to a private address here`);
    const r = await run('alice', `curl -sS --max-time 10 http://${name}:${O}/hello`);
    expect(r.stdout).toMatch(new RegExp(`^toolgate egress: refused ${name}:${O}: ${name} resolves to ${address.replace(/\./g, '\\.')}, a \\w+ address\n$`));
  });

  it('opens subdomains for a wildcard, and nothing near it', async () => {
    const curl = (host: string) => `curl -sS --max-time 10 http://${host}:${O}/hello`;
    const r = await run('alice', `${curl('pkg.mirror.test')}; ${curl('mirror.test')}; ${curl('mirror.test.evil.test')}`);
    expect(r.stdout).toBe(
      'hello from the origin\n' +
        `toolgate egress: refused mirror.test:${O}: not in this tenant's policy\n` +
        `toolgate egress: refused mirror.test.evil.test:${O}: not in this tenant's policy\n`,
    );
  });

  it("keeps tenants apart: alice's policy opens nothing for bob", async () => {
    const r = await run('bob', `curl -sS --max-time 10 http://registry.test:${O}/hello`);
    expect(r.stdout).toBe(`toolgate egress: refused registry.test:${O}: not in this tenant's policy\n`);
  });

  it("applies a policy change to the running sandbox's next connection", async () => {
    const started = bus.events.filter((e) => e.type === 'sandbox.started' && e.tenant === 'bob').length;
    await egress('set', '--id', 'bob', '--allow', `registry.test:${O}`);
    expect(await run('bob', `curl -sS --max-time 10 http://registry.test:${O}/hello`)).toMatchObject({ exitCode: 0, stdout: 'hello from the origin\n' });
    await egress('clear', '--id', 'bob');
    expect((await run('bob', `curl -sS --max-time 10 http://registry.test:${O}/hello`)).stdout).toMatch(/not in this tenant's policy/);
    // The same sandbox all along.
    expect(bus.events.filter((e) => e.type === 'sandbox.started' && e.tenant === 'bob')).toHaveLength(started);
  });

  it('fails closed for what ignores the proxy: raw TCP and DNS get nothing', async () => {
    const r = await run(
      'alice',
      `bash -c 'echo > /dev/tcp/127.0.0.1/${O}' 2>&1; echo "tcp=$?"; bash -c 'echo > /dev/tcp/1.1.1.1/80' 2>&1; echo "ext=$?"; ` +
        `curl -sS --noproxy '*' --max-time 5 http://registry.test:${O}/hello 2>&1; echo "direct=$?"; ` +
        `node -e "require('dns').lookup('example.com', (e) => { console.log('dns=' + (e ? e.code : 'resolved')); })"`,
    );
    expect(r.stdout).toMatch(/tcp=1\n/);
    expect(r.stdout).toMatch(/Network is unreachable[\s\S]*ext=1\n/);
    expect(r.stdout).toMatch(/Could not resolve host[\s\S]*direct=6\n/);
    expect(r.stdout).toMatch(/dns=E[A-Z_]+\n$/);
    expect(r.stdout).not.toContain('dns=resolved');
  });

  it('answers http_request under the same policy (and the SSRF guard with TOOLGATE_HTTP_ALLOW)', async () => {
    const ok = await call(bus, 'alice', 'http_request', { url: `http://registry.test:${O}/hello` });
    expect(ok.structuredContent).toMatchObject({ status: 200, body: 'hello from the origin\n' });
    // 127.0.0.1 is in TOOLGATE_HTTP_ALLOW, but not in alice's egress policy: both must allow.
    const direct = await call(bus, 'alice', 'http_request', { url: `http://127.0.0.1:${O}/hello` });
    expect(direct.isError).toBe(true);
    expect(text(direct)).toContain(`Refused: 127.0.0.1:${O}: not in this tenant's policy`);
    const bob = await call(bus, 'bob', 'http_request', { url: `http://registry.test:${O}/hello` });
    // bob has no policy and there is no default: http_request stays as it was without egress (the guard
    // alone), where a pin means nothing, so registry.test does not resolve.
    expect(bob.isError).toBe(true);
  });

  it('reports each connection on the bus and in the audit log', async () => {
    const closed = bus.events.find((e) => e.type === 'egress.closed' && e.tenant === 'alice' && e.host === 'registry.test');
    expect(closed).toMatchObject({ port: O, address: '127.0.0.1' });
    expect(closed && 'bytesIn' in closed && closed.bytesIn).toBeGreaterThan(0);
    const lines = logged.lines.filter((l) => l.audit === true && typeof l.event === 'string' && l.event.startsWith('egress.'));
    expect(lines).toContainEqual(
      expect.objectContaining({ event: 'egress.denied', identity: 'bob', host: 'registry.test', reason: "not in this tenant's policy" }),
    );
    expect(lines).toContainEqual(expect.objectContaining({ event: 'egress.closed', identity: 'alice', host: 'registry.test', address: '127.0.0.1' }));
  });

  it("keeps another tenant's egress and tool calls prompt while one tenant floods the proxy", async () => {
    await egress('set', '--id', 'bob', '--allow', `registry.test:${O}`);
    await run('bob', 'true'); // bob's sandbox is up
    const flood = run(
      'alice',
      `for i in $(seq ${options.flood}); do curl -s -o /dev/null --max-time 8 "http://registry.test:${O}/slow?ms=2500" & done; wait; echo done`,
    );
    // Let the flood reach its limit first.
    const end = Date.now() + 5000;
    while (!bus.events.some((e) => e.type === 'egress.denied' && e.tenant === 'alice' && e.limited) && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const t0 = Date.now();
    const [fetched, listed] = await Promise.all([
      run('bob', `curl -sS --max-time 5 http://registry.test:${O}/hello`),
      call(bus, 'bob', 'list_directory', { path: '.' }),
    ]);
    const took = Date.now() - t0;
    expect(fetched).toMatchObject({ exitCode: 0, stdout: 'hello from the origin\n' });
    expect(listed.isError).toBeFalsy();
    expect(took).toBeLessThan(1500);
    expect(bus.events).toContainEqual(expect.objectContaining({ type: 'egress.denied', tenant: 'alice', limited: true }));
    expect((await flood).stdout).toBe('done\n');
  });
}
