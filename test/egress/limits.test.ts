/**
 * Per-tenant egress limits through the proxy: connections at once and bytes per day, each
 * refused with a 403 that says which limit, without touching another tenant; the day rolling
 * over; and the metrics with their bounded labels.
 */
import type { EgressChannel } from '../../executor/egress/proxy';
import { connectTunnel, Harness, proxyRequest, readAll, Servers, startHarness, startServers } from './harness';

let h: Harness;
let servers: Servers;
let alice: EgressChannel;
let bob: EgressChannel;

beforeAll(async () => {
  h = await startHarness({ limits: { maxConnections: 2, bytesPerDay: 10_000 }, pins: { 'pinned.test': '127.0.0.1', 'echo.test': '127.0.0.1' } });
  servers = await startServers(h.dir);
  for (const tenant of ['alice', 'bob']) await h.store.set(tenant, { allow: `pinned.test:${servers.http.port},echo.test:${servers.echo.port}` });
  alice = await h.channel('alice');
  bob = await h.channel('bob');
});
afterAll(async () => {
  await h.close();
  await servers.close();
});

const until = async (check: () => boolean) => {
  for (let i = 0; i < 100 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
};

it('refuses a connection past the tenant limit with a 403 naming it; other tenants are unaffected; a freed slot is reusable', async () => {
  const echo = `echo.test:${servers.echo.port}`;
  const first = await connectTunnel(alice.socketPath, echo);
  const second = await connectTunnel(alice.socketPath, echo);
  expect([first.status, second.status]).toEqual([200, 200]);
  expect(await connectTunnel(alice.socketPath, echo)).toEqual({
    status: 403,
    body: `toolgate egress: refused ${echo}: limit: 2 connections at once for this tenant\n`,
  });
  const other = await connectTunnel(bob.socketPath, echo);
  expect(other.status).toBe(200);
  for (const t of [first, other]) if ('socket' in t) t.socket.destroy();
  await until(() => h.events.filter((e) => e.type === 'egress.closed').length >= 2);
  const again = await connectTunnel(alice.socketPath, echo);
  expect(again.status).toBe(200);
  for (const t of [second, again]) if ('socket' in t) t.socket.destroy();
  await until(() => h.events.filter((e) => e.type === 'egress.closed').length >= 4);
});

it('cuts a transfer at the daily byte limit, then refuses until the next day; other tenants keep theirs', async () => {
  const base = `http://pinned.test:${servers.http.port}`;
  expect((await proxyRequest(alice.socketPath, `${base}/big?n=4000`)).body).toHaveLength(4000);
  await expect(proxyRequest(alice.socketPath, `${base}/big?n=50000`)).rejects.toThrow();
  await until(() => h.events.at(-1)?.type === 'egress.closed');
  const cut = h.events.at(-1);
  expect(cut).toMatchObject({ type: 'egress.closed', tenant: 'alice', error: "limit: this tenant's 9.77 KiB of egress for today is used" });
  expect(cut?.type === 'egress.closed' && cut.bytesOut).toBeGreaterThan(0); // the request line and headers, counted from the socket

  const refused = await proxyRequest(alice.socketPath, `${base}/big?n=1`);
  expect(refused).toMatchObject({ status: 403 });
  expect(refused.body).toBe(`toolgate egress: refused pinned.test:${servers.http.port}: limit: this tenant's 9.77 KiB of egress for today is used\n`);
  expect((await proxyRequest(bob.socketPath, `${base}/big?n=5000`)).body).toHaveLength(5000);

  h.clock.now += 24 * 3600 * 1000;
  expect((await proxyRequest(alice.socketPath, `${base}/big?n=5000`)).status).toBe(200);
});

it('cuts a CONNECT tunnel at the daily byte limit, in the middle of a download', async () => {
  await h.store.set('carol', { allow: `pinned.test:${servers.http.port}` });
  const carol = await h.channel('carol');
  const tunnel = await connectTunnel(carol.socketPath, `pinned.test:${servers.http.port}`);
  if (!('socket' in tunnel)) throw new Error(`CONNECT answered ${tunnel.status}`);
  const read = readAll(tunnel.socket);
  tunnel.socket.write(`GET /big?n=200000 HTTP/1.1\r\nhost: pinned.test\r\nconnection: close\r\n\r\n`);
  // The chunk that would pass the day's limit is dropped, not delivered.
  expect((await read).length).toBeLessThanOrEqual(10_000);
  await until(() => h.events.some((e) => e.type === 'egress.closed' && e.tenant === 'carol'));
  expect(h.events.find((e) => e.type === 'egress.closed' && e.tenant === 'carol')).toMatchObject({
    error: "limit: this tenant's 9.77 KiB of egress for today is used",
  });
});

it('counts connections by result and bytes by direction, with no tenant or host label', async () => {
  await proxyRequest(alice.socketPath, 'http://nowhere.test/');
  const text = await h.registry.metrics();
  for (const result of ['allowed', 'denied', 'limited']) expect(text).toMatch(new RegExp(`toolgate_egress_connections_total\\{result="${result}"\\} [1-9]`));
  expect(text).toMatch(/toolgate_egress_bytes_total\{direction="in"\} [1-9]/);
  expect(text).toMatch(/toolgate_egress_bytes_total\{direction="out"\} [1-9]/);
  expect(text).not.toMatch(/alice|bob|pinned\.test/);
});
