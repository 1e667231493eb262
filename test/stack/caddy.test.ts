/**
 * infra/caddy (Caddyfile + entrypoint.sh) in the Caddy image the stack uses, in front of a
 * loopback stub that records what reaches it: TLS from Caddy's internal CA and from certificate
 * files, the API key (missing, wrong, several keys, stripped before proxying), the body limit
 * (413 before the upstream sees anything), only POST / forwarded, JSON-RPC error bodies, a down
 * upstream, admin API off and no write outside the data directory. The container runs as in
 * docker-compose.yml: host network, read-only root, no capabilities.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { describeIf, hasCommand } from '../helpers/availability';
import { dockerMissing, freePort, imageFor, RpcErrorBody, StubUpstream, TrustingClient, until } from './helpers';

const CADDY_DIR = path.resolve(__dirname, '../../infra/caddy');
const IMAGE = imageFor('CADDY_IMAGE', 'local/caddy:2', 'caddy:2');
const KEY = 'first-key_0123456789abcdef';
const OTHER_KEY = 'second-key_0123456789abcdef';
const LIMIT = 4096;
const CA_IN_CONTAINER = '/data/caddy/pki/authorities/local/root.crt';

const started: string[] = [];

function docker(args: string[]): string {
  return execFileSync('docker', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/** Runs the proxy as compose does; resolves with its container name once it serves. */
async function runCaddy(name: string, env: Record<string, string>, extra: string[] = []): Promise<string> {
  const envArgs = Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
  docker([
    'run',
    '-d',
    '--name',
    name,
    '--network',
    'host',
    '--read-only',
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges',
    '--tmpfs',
    '/data:rw,size=16m',
    '-v',
    `${CADDY_DIR}:/etc/caddy:ro`,
    ...envArgs,
    ...extra,
    '--entrypoint',
    '/bin/sh',
    IMAGE,
    '/etc/caddy/entrypoint.sh',
  ]);
  started.push(name);
  await until(`${name} to serve`, async () => (logsOf(name).includes('serving initial configuration') ? true : undefined), 20_000);
  return name;
}

/** Caddy logs to stderr, which `docker logs` passes on as its own stderr. */
function logsOf(name: string): string {
  const r = spawnSync('docker', ['logs', name], { encoding: 'utf8' });
  return `${r.stdout}${r.stderr}`;
}

describeIf(!dockerMissing([IMAGE]), dockerMissing([IMAGE]) ?? '', 'Caddy in front of the gateway (infra/caddy)', () => {
  let stub: StubUpstream;
  let port: number;
  let url: string;
  let name: string;
  let client: TrustingClient;

  beforeAll(async () => {
    stub = await StubUpstream.start();
    port = await freePort();
    url = `https://127.0.0.1:${port}/`;
    name = `toolgate-caddy-test-${process.pid}`;
    await runCaddy(name, {
      TOOLGATE_API_KEY: KEY,
      TOOLGATE_API_KEYS: OTHER_KEY,
      TOOLGATE_SITE_ADDRESS: `https://127.0.0.1:${port}`,
      TOOLGATE_UPSTREAM: `127.0.0.1:${stub.port}`,
      TOOLGATE_MAX_MESSAGE_BYTES: String(LIMIT),
      XDG_DATA_HOME: '/data',
    });
    const ca = await until('the internal CA', async () => docker(['exec', name, 'cat', CA_IN_CONTAINER]) || undefined, 10_000);
    client = new TrustingClient(ca);
  }, 60_000);

  afterAll(async () => {
    await client?.close();
    for (const c of started) spawnSync('docker', ['rm', '-f', c], { stdio: 'ignore' });
    await stub?.close();
  });

  const post = (headers: Record<string, string>, body: string | Buffer = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}') =>
    client.fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

  async function expectRpcError(res: Awaited<ReturnType<typeof post>>, status: number, code: number): Promise<RpcErrorBody> {
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toBe('application/json');
    const body = (await res.json()) as RpcErrorBody;
    expect(body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code } });
    return body;
  }

  test('TLS from its internal CA for 127.0.0.1; a client without that CA refuses the connection', async () => {
    const res = await client.fetch(`${url}healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
    await expect(fetch(`${url}healthz`)).rejects.toThrow();
    expect(stub.seen).toHaveLength(0);
  });

  test.each([
    ['no key', {}],
    ['an empty key', { 'X-API-Key': '' }],
    ['a wrong key', { 'X-API-Key': 'wrong-key_0123456789abcdef' }],
    ['a prefix of the key', { 'X-API-Key': KEY.slice(0, -1) }],
    ['the key and more', { 'X-API-Key': `${KEY}x` }],
    ['both keys in one value', { 'X-API-Key': `${KEY}|${OTHER_KEY}` }],
    ['the key in another case', { 'X-API-Key': KEY.toUpperCase() }],
    ['the key in Authorization only', { Authorization: `Bearer ${KEY}` }],
    ['the key under another header name', { 'X-Api-Token': KEY }],
  ])('%s: 401 with a JSON-RPC error, and the upstream sees nothing', async (_name, headers) => {
    const before = stub.seen.length;
    const res = await post(headers as Record<string, string>);
    const body = await expectRpcError(res, 401, -32008);
    expect(body.error.message).toContain('X-API-Key');
    expect(res.headers.get('www-authenticate')).toContain('X-API-Key');
    expect(res.headers.get('server')).toBeNull();
    expect(stub.seen.length).toBe(before);
  });

  test('the key is checked before the body limit and on every path', async () => {
    const before = stub.seen.length;
    await expectRpcError(await post({}, Buffer.alloc(LIMIT + 1, 32)), 401, -32008);
    for (const p of ['metrics', 'readyz', 'anything']) {
      const res = await client.fetch(`${url}${p}`);
      await expectRpcError(res, 401, -32008);
    }
    expect(stub.seen.length).toBe(before);
  });

  test('either configured key passes; the key header is stripped, the rest forwarded', async () => {
    for (const key of [KEY, OTHER_KEY]) {
      const before = stub.seen.length;
      const res = await post({ 'X-API-Key': key, Authorization: 'Bearer the-token' });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ result: { upstream: true } });
      expect(stub.seen.length).toBe(before + 1);
      const seen = stub.seen[stub.seen.length - 1]!;
      expect(seen).toMatchObject({ method: 'POST', url: '/', complete: true });
      expect(seen.headers['x-api-key']).toBeUndefined();
      expect(seen.headers.authorization).toBe('Bearer the-token');
      expect(seen.headers['x-forwarded-proto']).toBe('https');
      expect(seen.headers['content-type']).toBe('application/json');
      // The loopback-bound gateway answers only loopback Host names: Caddy sends the upstream's,
      // and the name the client used travels in X-Forwarded-Host.
      expect(seen.headers.host).toBe(`127.0.0.1:${stub.port}`);
      expect(seen.headers['x-forwarded-host']).toBe(new URL(url).host);
    }
  });

  test('a Content-Length over the limit is 413 before a byte reaches the upstream; the limit itself passes', async () => {
    const before = stub.seen.length;
    const body = await expectRpcError(await post({ 'X-API-Key': KEY }, Buffer.alloc(LIMIT + 1, 32)), 413, -32007);
    expect(body.error.data).toEqual({ limit: LIMIT });
    await expectRpcError(await post({ 'X-API-Key': KEY }, Buffer.alloc(10 * LIMIT, 32)), 413, -32007);
    expect(stub.seen.length).toBe(before);
    const res = await post({ 'X-API-Key': KEY }, Buffer.alloc(LIMIT, 32));
    expect(res.status).toBe(200);
    expect(stub.seen[stub.seen.length - 1]).toMatchObject({ bytes: LIMIT, complete: true });
  });

  test('the same over HTTP/2', async () => {
    const h2 = new TrustingClient(docker(['exec', name, 'cat', CA_IN_CONTAINER]), { allowH2: true });
    try {
      const before = stub.seen.length;
      const res = await h2.fetch(url, { method: 'POST', headers: { 'X-API-Key': KEY, 'content-type': 'application/json' }, body: Buffer.alloc(LIMIT + 1, 32) });
      await expectRpcError(res, 413, -32007);
      await expectRpcError(await h2.fetch(url, { method: 'POST', body: '{}' }), 401, -32008);
      expect(stub.seen.length).toBe(before);
      const ok = await h2.fetch(url, { method: 'POST', headers: { 'X-API-Key': KEY, 'content-type': 'application/json' }, body: '{}' });
      expect(ok.status).toBe(200);
      await ok.arrayBuffer();
    } finally {
      await h2.close();
    }
  });

  test('a chunked body over the limit is cut off and answered 413; the upstream never gets it whole', async () => {
    const before = stub.seen.length;
    const chunks = Array.from({ length: 8 }, () => Buffer.alloc(1024, 32));
    const res = await client.fetch(url, {
      method: 'POST',
      headers: { 'X-API-Key': KEY, 'content-type': 'application/json' },
      body: Readable.toWeb(Readable.from(chunks)) as unknown as ReadableStream,
      duplex: 'half',
    });
    await expectRpcError(res, 413, -32007);
    await until('the upstream to see the aborted upload', async () => (stub.seen.length > before ? true : undefined), 5_000).catch(() => undefined);
    for (const seen of stub.seen.slice(before)) {
      expect(seen.complete).toBe(false);
      expect(seen.bytes).toBeLessThanOrEqual(LIMIT);
    }
  });

  test('with a key, only POST / is forwarded: other paths are 404 from the proxy', async () => {
    const before = stub.seen.length;
    for (const p of ['metrics', 'readyz', 'x/../metrics']) {
      const res = await client.fetch(`${url}${p}`, { headers: { 'X-API-Key': KEY } });
      expect(res.status).toBe(404);
      await res.arrayBuffer();
    }
    expect(stub.seen.length).toBe(before);
  });

  test('the OAuth endpoint and its metadata pass without a key (the gateway checks OAuth tokens there); nothing else does', async () => {
    const before = stub.seen.length;
    const res = await client.fetch(`${url}mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', Authorization: 'Bearer an-oauth-token', 'X-API-Key': 'not-a-key' },
      body: '{}',
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    for (const p of ['.well-known/oauth-protected-resource/mcp', '.well-known/oauth-protected-resource']) {
      const meta = await client.fetch(`${url}${p}`);
      expect(meta.status).toBe(200);
      await meta.arrayBuffer();
    }
    expect(stub.seen.slice(before).map((s) => `${s.method} ${s.url}`)).toEqual([
      'POST /mcp',
      'GET /.well-known/oauth-protected-resource/mcp',
      'GET /.well-known/oauth-protected-resource',
    ]);
    const forwarded = stub.seen[before]!;
    expect(forwarded.headers.authorization).toBe('Bearer an-oauth-token');
    expect(forwarded.headers['x-api-key']).toBeUndefined();
    expect(forwarded.headers['x-forwarded-proto']).toBe('https');
    // The body limit still applies, and no neighbouring path slips past the key.
    await expectRpcError(await client.fetch(`${url}mcp`, { method: 'POST', body: Buffer.alloc(LIMIT + 1, 32) }), 413, -32007);
    for (const p of ['mcp/x', 'mcpx', '.well-known/oauth-protected-resource/other', '.well-known/openid-configuration']) {
      await expectRpcError(await client.fetch(`${url}${p}`), 401, -32008);
    }
    await expectRpcError(await post({}), 401, -32008);
    expect(stub.seen.length).toBe(before + 3);
  });

  test('a down upstream is a JSON-RPC Unavailable error, not an empty 502', async () => {
    const downPort = await freePort();
    const downName = `toolgate-caddy-down-${process.pid}`;
    const sitePort = await freePort();
    await runCaddy(downName, { TOOLGATE_API_KEY: KEY, TOOLGATE_SITE_ADDRESS: `https://127.0.0.1:${sitePort}`, TOOLGATE_UPSTREAM: `127.0.0.1:${downPort}` });
    const ca = await until('the CA', async () => docker(['exec', downName, 'cat', CA_IN_CONTAINER]) || undefined, 10_000);
    const down = new TrustingClient(ca);
    try {
      const res = await down.fetch(`https://127.0.0.1:${sitePort}/`, {
        method: 'POST',
        headers: { 'X-API-Key': KEY, 'content-type': 'application/json' },
        body: '{}',
      });
      await expectRpcError(res, 503, -32006);
    } finally {
      await down.close();
    }
  });

  test('admin API off, and nothing written outside the data directory', async () => {
    expect(logsOf(name)).toContain('admin endpoint disabled');
    const admin = await new Promise<string>((resolve) => {
      const socket = net.connect(2019, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve('connected')));
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
    });
    expect(admin).toBe('ECONNREFUSED');
    // No change to the container's own filesystem (its root is read-only) but the mount point
    // Docker itself made for the /data tmpfs.
    expect(
      docker(['diff', name])
        .split('\n')
        .filter((line) => line !== 'A /data'),
    ).toEqual([]);
    const written = docker(['exec', name, 'find', '/data', '-type', 'f']).split('\n').sort();
    expect(written).toContain('/data/config/caddy/autosave.json');
    expect(written).toContain(CA_IN_CONTAINER);
    expect(written.every((f) => f.startsWith('/data/caddy/') || f.startsWith('/data/config/'))).toBe(true);
  });

  test('without a key the proxy does not start at all', () => {
    const r = spawnSync(
      'docker',
      [
        'run',
        '--rm',
        '--network',
        'none',
        '--read-only',
        '--tmpfs',
        '/data',
        '-v',
        `${CADDY_DIR}:/etc/caddy:ro`,
        '--entrypoint',
        '/bin/sh',
        IMAGE,
        '/etc/caddy/entrypoint.sh',
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    expect(r.status).toBe(64);
    expect(r.stderr).toContain('TOOLGATE_API_KEY is not set');
  });

  test('the Caddyfile alone, without the entrypoint, is refused (its settings are unset)', () => {
    const r = spawnSync(
      'docker',
      [
        'run',
        '--rm',
        '--network',
        'none',
        '--read-only',
        '--tmpfs',
        '/data',
        '-v',
        `${CADDY_DIR}:/etc/caddy:ro`,
        '-e',
        `TOOLGATE_API_KEY=${KEY}`,
        '-e',
        'XDG_DATA_HOME=/data',
        '-e',
        'XDG_CONFIG_HOME=/data/config',
        IMAGE,
        'caddy',
        'run',
        '--config',
        '/etc/caddy/Caddyfile',
        '--adapter',
        'caddyfile',
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/Error/);
  });

  describeIf(hasCommand('openssl'), 'openssl is not installed, so no certificate files can be made', 'TLS from certificate files', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-caddy-tls-'));
      const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
      const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
      run(
        'req',
        '-x509',
        ...ec,
        '-keyout',
        'ca.key',
        '-out',
        'ca.crt',
        '-days',
        '2',
        '-subj',
        '/CN=toolgate test CA',
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      );
      run('req', ...ec, '-keyout', 'tls.key', '-out', 'tls.csr', '-subj', '/CN=127.0.0.1');
      await fs.writeFile(path.join(dir, 'tls.ext'), 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
      run('x509', '-req', '-in', 'tls.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'tls.crt', '-days', '2', '-extfile', 'tls.ext');
      // Caddy runs without capabilities: it reads only what its uid may read.
      await fs.chmod(path.join(dir, 'tls.key'), 0o644);
      await fs.chmod(dir, 0o755);
    });
    afterAll(async () => {
      await fs.rm(dir, { recursive: true, force: true });
    });

    test('serves the given certificate, with the same API-key check', async () => {
      const sitePort = await freePort();
      await runCaddy(
        `toolgate-caddy-files-${process.pid}`,
        {
          TOOLGATE_API_KEY: KEY,
          TOOLGATE_SITE_ADDRESS: `https://127.0.0.1:${sitePort}`,
          TOOLGATE_UPSTREAM: `127.0.0.1:${stub.port}`,
          TOOLGATE_TLS: 'files',
          TOOLGATE_TLS_CERT_FILE: '/etc/toolgate/tls/tls.crt',
          TOOLGATE_TLS_KEY_FILE: '/etc/toolgate/tls/tls.key',
        },
        ['-v', `${dir}:/etc/toolgate/tls:ro`],
      );
      const own = new TrustingClient(await fs.readFile(path.join(dir, 'ca.crt')));
      try {
        const site = `https://127.0.0.1:${sitePort}/`;
        expect((await own.fetch(`${site}healthz`)).status).toBe(200);
        await expectRpcError(await own.fetch(site, { method: 'POST', body: '{}' }), 401, -32008);
        const ok = await own.fetch(site, { method: 'POST', headers: { 'X-API-Key': KEY, 'content-type': 'application/json' }, body: '{}' });
        expect(ok.status).toBe(200);
        await ok.arrayBuffer();
        // The internal CA of the other proxy does not vouch for this one.
        await expect(client.fetch(`${site}healthz`)).rejects.toThrow();
      } finally {
        await own.close();
      }
    });
  });
});
