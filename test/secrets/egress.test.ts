/**
 * Secrets through the egress proxy, with real curl as a sandbox's command would run it (through
 * a TCP relay to the channel's socket, as the sandbox's relay does) and real servers on
 * 127.0.0.1 reached by pinned names: plain HTTP, and HTTPS from a server whose own CA the proxy
 * trusts only through TOOLGATE_EGRESS_CA_FILE. The server receives the value (Bearer header and
 * Basic from URL userinfo); curl sees `[secret:NAME]` at most; a host without a secret, and
 * another tenant, get the placeholder as written through an end-to-end tunnel.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import pino from 'pino';
import { fileSecretBackend } from '../../executor/secrets/backends';
import type { CertificateAuthority } from '../../executor/secrets/ca';
import { secretAuditor, SecretService, startSecretService } from '../../executor/secrets/service';
import { createSecretStore } from '../../executor/secrets/store';
import { trustEnv } from '../../executor/secrets/trust';
import { loadConfig } from '../../shared/config';
import { createLogger } from '../../shared/log';
import type { SecretUsedEvent } from '../../shared/secrets/broker';
import { describeIf, hasCommand, itIf } from '../helpers/availability';
import { makeRepo, serveGit } from './git-backend';
import { listen, Origins, startOrigins } from './origins';
import { Harness, startHarness } from '../egress/harness';

const run = promisify(execFile);
const KEY = randomBytes(32).toString('hex');
const TOKEN = 'ghs_' + randomBytes(20).toString('hex');
const PASS = 'pw_' + randomBytes(16).toString('hex');

interface Seen {
  url: string;
  headers: http.IncomingHttpHeaders;
}

/** Echoes the request's headers as JSON; /basic first asks for Basic credentials (as git's server does). */
function handler(seen: Seen[], gitRoot: () => string) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    if (req.url?.startsWith('/repo.git/')) return serveGit(gitRoot(), PASS, req, res);
    if (req.url === '/basic' && !req.headers.authorization) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git"', 'content-length': 0 });
      return void res.end();
    }
    res.writeHead(200, { 'content-type': 'application/json', 'x-seen': String(req.headers.authorization ?? '') });
    res.end(JSON.stringify({ authorization: req.headers.authorization ?? null }));
  };
}

describeIf(hasCommand('curl'), 'curl is not installed', 'secrets through the egress proxy (curl)', () => {
  let h: Harness;
  let dir: string;
  let service: SecretService;
  let origins: Origins;
  let upstreamCa: CertificateAuthority;
  let plainPort: number;
  let tlsPort: number;
  let relays: net.Server[] = [];
  const seen: Seen[] = [];
  const events: SecretUsedEvent[] = [];
  const logLines: string[] = [];

  /** A TCP relay to a channel's socket, as the sandbox's relay will be; resolves with its proxy URL. */
  async function relayTo(socketPath: string): Promise<string> {
    const relay = net.createServer((client) => {
      const upstream = net.connect(socketPath);
      client.pipe(upstream).pipe(client);
      upstream.once('close', () => client.resume());
      client.once('close', () => upstream.resume());
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    relays.push(relay);
    return `http://127.0.0.1:${await listen(relay)}`;
  }

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-secrets-egress-'));
    await makeRepo(path.join(dir, 'git'));
    origins = await startOrigins(
      dir,
      handler(seen, () => path.join(dir, 'git')),
    );
    ({ ca: upstreamCa, plainPort, tlsPort } = origins);
    const data = path.join(dir, 'data');
    const store = createSecretStore(fileSecretBackend(data), KEY);
    await store.set('alice', { name: 'GH_TOKEN', host: `api.git.test:${tlsPort},api.git.test:${plainPort}`, value: TOKEN });
    await store.set('alice', { name: 'GIT_PASS', host: `api.git.test:${tlsPort}`, value: PASS });
    const pinoLog = pino({ level: 'info' }, new Writable({ write: (c: Buffer, _e, done) => (logLines.push(c.toString()), done()) }));
    const audit = secretAuditor(pinoLog);
    service = await startSecretService({
      config: loadConfig({ TOOLGATE_DATA_DIR: data, TOOLGATE_SECRETS_KEY: KEY, TOOLGATE_EGRESS_CA_FILE: upstreamCa.certFile }),
      log: createLogger('silent', 'test', 'json'),
      onUse: (e) => {
        events.push(e);
        audit(e);
      },
    });
    h = await startHarness({ pins: { 'api.git.test': '127.0.0.1', 'other.test': '127.0.0.1' }, secrets: service.egress });
    const allow = `api.git.test:${tlsPort},api.git.test:${plainPort},other.test:${plainPort},other.test:${tlsPort}`;
    await h.store.set('alice', { allow });
    await h.store.set('bob', { allow });
  });

  afterAll(async () => {
    for (const r of relays) await new Promise((done) => r.close(done));
    relays = [];
    await h.close();
    await service.close();
    await origins.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  beforeEach(() => {
    seen.length = 0;
    events.length = 0;
  });

  const curl = async (tenant: string, ...args: string[]) => curlWith({}, tenant, ...args);
  const curlWith = async (env: Record<string, string>, tenant: string, ...args: string[]) => {
    const proxy = await relayTo((await h.channel(tenant)).socketPath);
    try {
      const { stdout, stderr } = await run('curl', ['-sS', '-g', '--max-time', '10', '--proxy', proxy, ...args], {
        env: { PATH: process.env.PATH ?? '', ...env },
      });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  const bearer = ['-H', 'Authorization: Bearer {{secret:GH_TOKEN}}'];

  it('plain HTTP: the server gets the value; curl sees [secret:NAME] in the echoed body and headers', async () => {
    const r = await curl('alice', '-i', ...bearer, `http://api.git.test:${plainPort}/api`);
    expect(r.code).toBe(0);
    expect(seen[0]?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(r.stdout).toContain('Bearer [secret:GH_TOKEN]');
    expect(r.stdout + r.stderr).not.toContain(TOKEN);
  });

  it('HTTPS: the proxy terminates TLS with its CA (which the sandbox trusts), verifies the real host, and swaps the value', async () => {
    const r = await curl('alice', '-i', '--cacert', service.caCertFile!, ...bearer, `https://api.git.test:${tlsPort}/api`);
    expect(r).toMatchObject({ code: 0 });
    expect(seen[0]?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(r.stdout).toContain('"authorization":"Bearer [secret:GH_TOKEN]"');
    expect(r.stdout + r.stderr).not.toContain(TOKEN);
    expect(events).toEqual([
      expect.objectContaining({ type: 'secret.used', tenant: 'alice', name: 'GH_TOKEN', host: 'api.git.test', port: tlsPort, tool: 'egress' }),
    ]);
    expect(JSON.stringify(events) + logLines.join('')).not.toContain(TOKEN);
    expect(logLines.some((l) => l.includes('"event":"secret.used"') && l.includes('"secret":"GH_TOKEN"'))).toBe(true);
  });

  it('HTTPS with the password in the URL (what git sends for https://user:$GIT_PASS@host/): Basic credentials get the value', async () => {
    // Trust as a sandbox gets it: the bundle (system roots + the executor's CA) named by the variables.
    const r = await curlWith({ ...trustEnv(service.caBundleFile!) }, 'alice', `https://user:{{secret:GIT_PASS}}@api.git.test:${tlsPort}/basic`);
    expect(r).toMatchObject({ code: 0 });
    const sent = seen.find((s) => s.headers.authorization)?.headers.authorization ?? '';
    expect(Buffer.from(sent.replace(/^Basic /, ''), 'base64').toString()).toBe(`user:${PASS}`);
    expect(r.stdout + r.stderr).not.toContain(PASS);
  });

  itIf(
    hasCommand('git'),
    'needs git',
    'git clone https://user:$GIT_PASS@host/repo.git through the proxy: the server gets the password, the clone keeps the placeholder',
    async () => {
      const proxy = await relayTo((await h.channel('alice')).socketPath);
      const home = path.join(dir, 'home');
      await fs.mkdir(home, { recursive: true });
      const env = {
        PATH: process.env.PATH ?? '',
        HOME: home,
        GIT_TERMINAL_PROMPT: '0',
        https_proxy: proxy,
        GIT_PASS: '{{secret:GIT_PASS}}',
        ...trustEnv(service.caBundleFile!),
      };
      const url = `https://user:$GIT_PASS@api.git.test:${tlsPort}/repo.git`;
      const { stderr } = await run('sh', ['-c', `git clone -q "${url}" clone 2>&1`], { cwd: home, env }).catch((e: { stdout: string; stderr: string }) => ({
        stderr: e.stdout + e.stderr,
      }));
      expect(stderr).toBe('');
      expect(await fs.readFile(path.join(home, 'clone', 'README'), 'utf8')).toBe('hello from the test repo\n');
      const config = await fs.readFile(path.join(home, 'clone', '.git', 'config'), 'utf8');
      expect(config).toContain('{{secret:GIT_PASS}}');
      expect(config).not.toContain(PASS);
      expect(seen.some((s) => s.headers.authorization === `Basic ${Buffer.from(`user:${PASS}`).toString('base64')}`)).toBe(true);
      expect(events.every((e) => e.name === 'GIT_PASS' && e.tool === 'egress')).toBe(true);
    },
  );

  it('a host without a secret is a plain tunnel (its own certificate, end to end) and gets the placeholder as written', async () => {
    const r = await curl('alice', '--cacert', upstreamCa.certFile, ...bearer, `https://other.test:${tlsPort}/api`);
    expect(r).toMatchObject({ code: 0 });
    expect(seen[0]?.headers.authorization).toBe('Bearer {{secret:GH_TOKEN}}');
    const plain = await curl('alice', ...bearer, `http://other.test:${plainPort}/api`);
    expect(plain.code).toBe(0);
    expect(seen[1]?.headers.authorization).toBe('Bearer {{secret:GH_TOKEN}}');
    expect(events).toEqual([]);
  });

  it("tenant B cannot use A's secret name: its request to A's host is tunnelled and arrives as the placeholder", async () => {
    const r = await curl('bob', '--cacert', upstreamCa.certFile, ...bearer, `https://api.git.test:${tlsPort}/api`);
    expect(r).toMatchObject({ code: 0 });
    expect(seen[0]?.headers.authorization).toBe('Bearer {{secret:GH_TOKEN}}');
    expect(events).toEqual([]);
  });

  it('an upstream certificate the proxy cannot verify fails the request (502), and nothing is sent', async () => {
    const strict = await startSecretService({
      config: loadConfig({ TOOLGATE_DATA_DIR: path.join(dir, 'data'), TOOLGATE_SECRETS_KEY: KEY }),
      log: createLogger('silent', 'test', 'json'),
      onUse: () => undefined,
    });
    const h2 = await startHarness({ pins: { 'api.git.test': '127.0.0.1' }, secrets: strict.egress });
    await h2.store.set('alice', { allow: `api.git.test:${tlsPort}` });
    const proxy = await relayTo((await h2.channel('alice')).socketPath);
    const r = await run('curl', ['-sS', '-i', '--proxy', proxy, '--cacert', strict.caCertFile!, ...bearer, `https://api.git.test:${tlsPort}/api`]).catch(
      (e: { stdout: string }) => e,
    );
    expect(r.stdout).toContain('HTTP/1.1 502');
    expect(seen).toEqual([]);
    await h2.close();
    await strict.close();
  });
});
