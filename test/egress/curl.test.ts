/**
 * Real curl through the proxy. curl cannot use a Unix socket as an HTTP proxy, so the test runs
 * what the sandbox's relay will be: a TCP listener on 127.0.0.1 that forwards each connection to
 * the channel's socket. curl hands names to the proxy unresolved (for http:// and for CONNECT),
 * so the proxy's pins are what reach the loopback servers.
 */
import { execFile } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { promises as fs } from 'node:fs';
import { describeIf, hasCommand } from '../helpers/availability';
import { Harness, Servers, startHarness, startServers } from './harness';

const run = promisify(execFile);

describeIf(hasCommand('curl'), 'curl is not installed', 'curl through the egress proxy', () => {
  let h: Harness;
  let servers: Servers;
  let relay: net.Server;
  let proxy: string;
  const relayed = new Set<net.Socket>();

  beforeAll(async () => {
    h = await startHarness({ pins: { 'pinned.test': '127.0.0.1', 'secure.test': '127.0.0.1' }, dns: { 'rebind.test': '127.0.0.1' } });
    servers = await startServers(h.dir);
    const tlsRule = `,secure.test:${servers.tls.port}`;
    await h.store.set('alice', { allow: `pinned.test:${servers.http.port},rebind.test:${servers.http.port}${tlsRule}` });
    const channel = await h.channel('alice');
    relay = net.createServer((client) => {
      const upstream = net.connect(channel.socketPath);
      for (const socket of [client, upstream]) {
        relayed.add(socket);
        socket.once('close', () => relayed.delete(socket));
      }
      client.pipe(upstream).pipe(client);
      // A closed destination unpipes its source and leaves it paused: what curl sends after the
      // proxy closed (a TLS close_notify) would sit unread and the client never end. Drain it.
      upstream.once('close', () => client.resume());
      client.once('close', () => upstream.resume());
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    proxy = `http://127.0.0.1:${(relay.address() as net.AddressInfo).port}`;
  });
  afterAll(async () => {
    for (let i = 0; i < 100 && relayed.size > 0; i++) await new Promise((r) => setTimeout(r, 20));
    const stuck = [...relayed].map((s) => `${s.remotePort ?? 'unix'} readableEnded=${s.readableEnded} writableEnded=${s.writableEnded}`);
    for (const socket of relayed) socket.destroy();
    await new Promise((r) => relay.close(r));
    await h.close();
    await servers.close();
    // The proxy ends every connection curl ended; otherwise a sandbox's relay would hold them forever.
    expect(stuck).toEqual([]);
  });

  /** curl's exit code, stdout and stderr; the environment has no proxy variables of its own. */
  const curl = async (...args: string[]) => {
    try {
      const { stdout, stderr } = await run('curl', ['-sS', '--max-time', '10', '--proxy', proxy, ...args], { env: { PATH: process.env.PATH ?? '' } });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };

  it('fetches over HTTP from an allowed, pinned name', async () => {
    expect(await curl(`http://pinned.test:${servers.http.port}/from-curl`)).toMatchObject({ code: 0, stdout: 'hello GET /from-curl' });
  });

  it('fetches over HTTPS (CONNECT), verifying the upstream certificate end to end', async () => {
    const ca = path.join(h.dir, 'ca.pem');
    await fs.writeFile(ca, servers.tls.ca);
    expect(await curl('--cacert', ca, `https://secure.test:${servers.tls.port}/`)).toMatchObject({ code: 0, stdout: 'secret' });
  });

  it('shows the refusal line for a denied host, over HTTP and HTTPS', async () => {
    const plain = await curl('-w', '%{http_code}', 'http://denied.test/');
    expect(plain.stdout).toBe("toolgate egress: refused denied.test:80: not in this tenant's policy\n403");
    const secure = await curl('https://denied.test/');
    expect(secure.code).not.toBe(0);
    expect(secure.stderr).toMatch(/CONNECT tunnel failed, response 403/);
  });

  it('shows why a private address behind an allowed name is refused', async () => {
    const reply = await curl(`http://rebind.test:${servers.http.port}/`);
    expect(reply.stdout).toBe(`toolgate egress: refused rebind.test:${servers.http.port}: rebind.test resolves to 127.0.0.1, a loopback address\n`);
  });
});
