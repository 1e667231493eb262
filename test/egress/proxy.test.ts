/**
 * The egress proxy through its Unix socket, with Node clients and real servers on 127.0.0.1:
 * forward HTTP, CONNECT to TLS (verified end to end) and to raw TCP, refusals with their one-line
 * 403, the SSRF guard behind an allowed name, pins, wildcard near-misses, tenant isolation by
 * channel, and a live policy change on a kept-alive client connection.
 */
import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import * as tls from 'node:tls';
import type { EgressChannel } from '../../executor/egress/proxy';
import { connectTunnel, Harness, proxyRequest, readAll, Servers, startHarness, startServers } from './harness';

let h: Harness;
let servers: Servers;
let a: EgressChannel;
let b: EgressChannel;
let P: number;
const queries = new Map<string, number>();

beforeAll(async () => {
  h = await startHarness({
    pins: { 'pinned.test': '127.0.0.1', 'secure.test': '127.0.0.1', 'echo.test': '127.0.0.1', 'b.example.test': '127.0.0.1' },
    queries,
    dns: {
      'cidr.test': '127.0.0.1',
      'rebind.test': '127.0.0.1',
      'a.example.test': '127.0.0.1',
      'example.test': '127.0.0.1',
      'evilexample.test': '127.0.0.1',
      'example.test.evil.test': '127.0.0.1',
    },
  });
  servers = await startServers(h.dir);
  P = servers.http.port;
  const tlsRule = `,secure.test:${servers.tls.port}`;
  await h.store.set('alice', { allow: `pinned.test:${P},echo.test:${servers.echo.port},rebind.test:${P},*.example.test:${P}${tlsRule}` });
  a = await h.channel('alice');
  b = await h.channel('bob');
});
afterAll(async () => {
  await h.close();
  await servers.close();
});

const refusal = (host: string, port: number, reason: string) => `toolgate egress: refused ${host}:${port}: ${reason}\n`;

describe('forward HTTP', () => {
  it('forwards an absolute-URI request to the allowed name, end-to-end headers only', async () => {
    const reply = await proxyRequest(a.socketPath, `http://pinned.test:${P}/hello?x=1`, {
      method: 'POST',
      body: 'payload',
      headers: { 'proxy-authorization': 'Basic Ym9iOmJvYg==', 'x-keep': 'yes', 'proxy-connection': 'keep-alive' },
    });
    expect(reply).toMatchObject({ status: 200, body: 'hello POST /hello?x=1' });
    const seen = servers.http.seen.at(-1);
    expect(seen).toMatchObject({ method: 'POST', url: '/hello?x=1', body: 'payload' });
    expect(seen?.headers).toMatchObject({ host: `pinned.test:${P}`, 'x-keep': 'yes' });
    expect(seen?.headers['proxy-authorization']).toBeUndefined();
    expect(seen?.headers['proxy-connection']).toBeUndefined();
  });

  it('sends the target URI as Host, whatever Host the client wrote', async () => {
    await proxyRequest(a.socketPath, `http://pinned.test:${P}/fronted`, { headers: { host: 'internal.example' } });
    expect(servers.http.seen.at(-1)?.headers.host).toBe(`pinned.test:${P}`);
  });

  it('resolves a name once per connection and connects to the address it checked', async () => {
    // No name rule: only the CIDR rule for the resolved address opens it.
    await h.store.set('erin', { allow: `127.0.0.1/32:${P}` });
    const e = await h.channel('erin');
    expect((await proxyRequest(e.socketPath, `http://cidr.test:${P}/once`)).status).toBe(200);
    expect(queries.get('cidr.test')).toBe(1);
  });

  it('refuses a host outside the policy with 403 and a one-line reason, and reports it', async () => {
    const reply = await proxyRequest(a.socketPath, `http://other.test:${P}/`);
    expect(reply.status).toBe(403);
    expect(reply.body).toBe(refusal('other.test', P, "not in this tenant's policy"));
    expect(h.events.at(-1)).toMatchObject({ type: 'egress.denied', tenant: 'alice', host: 'other.test', port: P, reason: "not in this tenant's policy" });
  });

  it('refuses the allowed name on another port', async () => {
    expect((await proxyRequest(a.socketPath, `http://pinned.test:${servers.echo.port}/`)).status).toBe(403);
  });

  it('refuses a private address behind an allowed (unpinned) name', async () => {
    const reply = await proxyRequest(a.socketPath, `http://rebind.test:${P}/`);
    expect(reply).toMatchObject({ status: 403, body: refusal('rebind.test', P, 'rebind.test resolves to 127.0.0.1, a loopback address') });
  });

  it('matches *.name against strict subdomains only (near-misses refused)', async () => {
    expect((await proxyRequest(a.socketPath, `http://b.example.test:${P}/w`)).body).toBe('hello GET /w'); // pinned
    expect((await proxyRequest(a.socketPath, `http://a.example.test:${P}/`)).status).toBe(403); // allowed name, but loopback via DNS
    for (const host of ['example.test', 'evilexample.test', 'example.test.evil.test']) {
      const reply = await proxyRequest(a.socketPath, `http://${host}:${P}/`);
      expect(reply.body).toBe(refusal(host, P, "not in this tenant's policy"));
    }
    expect(h.events.at(-4)).toMatchObject({ host: 'a.example.test', reason: 'a.example.test resolves to 127.0.0.1, a loopback address' });
  });

  it('answers 400 to a request that is not for a proxy', async () => {
    const reply = await new Promise<number>((resolve, reject) =>
      http.get({ socketPath: a.socketPath, path: '/just-a-path' }, (res) => (res.resume(), resolve(res.statusCode ?? 0))).on('error', reject),
    );
    expect(reply).toBe(400);
  });

  it('answers 502 naming the host when nothing listens on the allowed address', async () => {
    await h.store.set('carol', { allow: '127.0.0.1:1' });
    const c = await h.channel('carol');
    const reply = await proxyRequest(c.socketPath, 'http://127.0.0.1:1/');
    expect(reply).toMatchObject({ status: 502, body: 'toolgate egress: cannot connect to 127.0.0.1:1 (ECONNREFUSED)\n' });
  });
});

describe('CONNECT', () => {
  it('tunnels TLS end to end to a pinned name: the client verifies the upstream certificate', async () => {
    const tunnel = await connectTunnel(a.socketPath, `secure.test:${servers.tls.port}`);
    if (tunnel.status !== 200 || !('socket' in tunnel)) throw new Error(`CONNECT answered ${tunnel.status}`);
    const secure = tls.connect({ socket: tunnel.socket, servername: 'secure.test', ca: servers.tls.ca });
    await new Promise<void>((resolve, reject) => secure.once('secureConnect', resolve).once('error', reject));
    secure.write('GET / HTTP/1.1\r\nhost: secure.test\r\n\r\n');
    expect(await readAll(secure)).toMatch(/\r\n\r\nsecret$/);
    expect(servers.tls.sni).toContain('secure.test');
  });

  it('tunnels raw TCP both ways, half-close included, and reports the bytes when it closes', async () => {
    const tunnel = await connectTunnel(a.socketPath, `echo.test:${servers.echo.port}`);
    if (!('socket' in tunnel)) throw new Error(`CONNECT answered ${tunnel.status}`);
    const closed = new Promise<void>((resolve) => tunnel.socket.once('close', () => setImmediate(resolve)));
    tunnel.socket.end('ping over a tunnel');
    expect(await readAll(tunnel.socket)).toBe('ping over a tunnel');
    await closed;
    await new Promise((r) => setTimeout(r, 50));
    const event = h.events.filter((e) => e.type === 'egress.closed').at(-1);
    expect(event).toMatchObject({
      type: 'egress.closed',
      tenant: 'alice',
      host: 'echo.test',
      port: servers.echo.port,
      address: '127.0.0.1',
      bytesIn: 18,
      bytesOut: 18,
    });
    expect(event && 'error' in event).toBe(false);
  });

  it('refuses CONNECT outside the policy with 403 and the reason', async () => {
    const tunnel = await connectTunnel(a.socketPath, 'other.test:443');
    expect(tunnel).toEqual({ status: 403, body: refusal('other.test', 443, "not in this tenant's policy") });
    const v6 = await connectTunnel(a.socketPath, '[::1]:443');
    expect(v6).toEqual({ status: 403, body: refusal('[::1]', 443, "not in this tenant's policy") });
  });
});

describe('tenants and live changes', () => {
  it("attributes by channel: alice's allow opens nothing on bob's, whatever bob claims", async () => {
    const claim = { 'proxy-authorization': `Basic ${Buffer.from('alice:alice').toString('base64')}` };
    expect((await proxyRequest(a.socketPath, `http://pinned.test:${P}/`)).status).toBe(200);
    expect(await proxyRequest(b.socketPath, `http://pinned.test:${P}/`, { headers: claim })).toMatchObject({
      status: 403,
      body: refusal('pinned.test', P, "not in this tenant's policy"),
    });
    expect(await connectTunnel(b.socketPath, `echo.test:${servers.echo.port}`, claim)).toMatchObject({ status: 403 });
    expect(h.events.at(-1)).toMatchObject({ type: 'egress.denied', tenant: 'bob' });
  });

  it('applies a policy change to the next connection, on the same kept-alive client connection', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const url = `http://pinned.test:${P}/live`;
      expect((await proxyRequest(b.socketPath, url, { agent })).status).toBe(403);
      await h.store.set('bob', { allow: `pinned.test:${P}` });
      expect((await proxyRequest(b.socketPath, url, { agent })).status).toBe(200);
      await h.store.set('bob', { allow: `pinned.test:${P}`, deny: 'pinned.test:80,*.test:' + P });
      expect((await proxyRequest(b.socketPath, url, { agent })).body).toBe(refusal('pinned.test', P, "denied by this tenant's policy"));
      await h.store.clear('bob');
      expect((await proxyRequest(b.socketPath, url, { agent })).status).toBe(403);
    } finally {
      agent.destroy();
    }
  });

  it('closes: the socket file is gone and no connection is accepted', async () => {
    const c = await h.channel('dave');
    expect((await fs.stat(c.socketPath)).mode & 0o777).toBe(0o666);
    await c.close();
    await expect(fs.stat(c.socketPath)).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(proxyRequest(c.socketPath, `http://pinned.test:${P}/`)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
