/**
 * The whole deployment as `npm run stack:up` brings it up (docker-compose: Caddy, gateway,
 * Redis, executor with docker sandboxes, host networking), exercised only through Caddy over TLS
 * with the CA it writes to .toolgate/ca.crt:
 *   - no or a wrong API key → 401 with a JSON-RPC error, and the gateway never sees the request
 *     (its own request counter, read on its private port, does not move);
 *   - a valid key and token → tools/list, and tools/call of every tool of every family;
 *   - an oversized body → 413 from Caddy, again unseen by the gateway;
 *   - the official SDK client over HTTPS (Streamable HTTP, custom fetch trusting the CA);
 *   - `toolgate shim --url https://127.0.0.1:PORT/ --ca CA` under the SDK's stdio client;
 *   - `docker-compose exec -T gateway generate-token` issues the tokens used throughout.
 * `npm run stack:down` removes it afterwards.
 *
 * The stack is a compose project of its own on free loopback ports (Caddy, gateway, Redis), with
 * its own executor id and CA file: it runs beside `npm start` or a developer's own stack.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { fetch as undiciFetch } from 'undici';
import { ALL_TOOLS } from '../../shared/tools/index';
import { describeIf } from '../helpers/availability';
import { dockerMissing, freePort, imageFor, RpcErrorBody, TrustingClient } from './helpers';

const REPO = path.resolve(__dirname, '../..');
const BIN = path.join(REPO, 'dist/bin/toolgate.js');
/** This run's own CA file, compose project and executor id (nothing shared with another stack). */
const RUN = `e2e${process.pid}`;
const CA_FILE = path.join(REPO, `.toolgate/ca-${RUN}.crt`);
/** A new tenant each run: its workspace is created (and handed to the sandbox uid) by this run. */
const TENANT = `stack-e2e-${Date.now()}`;
const IMAGES = [
  imageFor('NODE_IMAGE', 'local/node:24-bookworm-slim', 'node:24-bookworm-slim'),
  imageFor('NODE_BUILD_IMAGE', 'local/node:24-bookworm', 'node:24-bookworm'),
  imageFor('REDIS_IMAGE', 'local/redis:7', 'redis:7'),
  imageFor('CADDY_IMAGE', 'local/caddy:2', 'caddy:2'),
];
const missing = dockerMissing(IMAGES, true);
/** The sandbox the stack runs: docker unless the environment chose another for a trial. */
const SANDBOX = process.env.TOOLGATE_SANDBOX?.trim() || 'docker';

type Result = { content: Array<{ type: string; text?: string }>; structuredContent?: Record<string, unknown>; isError?: boolean };
const text = (r: Result) => r.content.map((c) => c.text ?? '').join('\n');

/** Runs an npm script of this repo; rejects with its output when it fails. */
function npmRun(script: string, env: NodeJS.ProcessEnv, args: string[] = []): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', '--silent', script, ...(args.length ? ['--', ...args] : [])], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`npm run ${script} exited ${code}:\n${out.slice(-6000)}`))));
  });
}

function readDotEnv(): Record<string, string> {
  const values: Record<string, string> = {};
  for (const line of readFileSync(path.join(REPO, '.env'), 'utf8').split('\n')) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line);
    if (m) values[m[1]!] = m[2]!;
  }
  return values;
}

/** The stack's environment: set in beforeAll, used by every compose command of this suite. */
let stackEnv: NodeJS.ProcessEnv = process.env;

function generateToken(args: string[]): string {
  const out = execFileSync('docker-compose', ['exec', '-T', 'gateway', 'generate-token', ...args], {
    cwd: REPO,
    env: stackEnv,
    encoding: 'utf8',
    timeout: 30_000,
  });
  return out.split('\n')[0]!.trim();
}

describeIf(!missing, missing ?? '', 'the compose stack through Caddy over TLS (npm run stack:up)', () => {
  let site: string;
  let apiKey: string;
  let metricsUrl: string;
  let token: string;
  let client: TrustingClient;
  let target: http.Server;
  let targetPort: number;
  let upOutput = '';

  beforeAll(async () => {
    // http_request's target: a loopback server the stack's allow-list names.
    target = http.createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ method: req.method, url: req.url, apiKey: req.headers['x-api-key'] ?? null }));
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    targetPort = (target.address() as { port: number }).port;

    // Every host port the stack listens on is picked free now (host networking: no mapping).
    const [caddyPort, gatewayPort, redisPort] = [await freePort(), await freePort(), await freePort()];
    site = `https://127.0.0.1:${caddyPort}/`;
    metricsUrl = `http://127.0.0.1:${gatewayPort}/metrics`;
    stackEnv = {
      ...process.env,
      COMPOSE_PROJECT_NAME: `toolgate-${RUN}`,
      TOOLGATE_EXECUTOR_ID: `toolgate-${RUN}`,
      TOOLGATE_STACK_CA_FILE: CA_FILE,
      TOOLGATE_SITE_ADDRESS: site.slice(0, -1),
      TOOLGATE_PORT: String(gatewayPort),
      TOOLGATE_REDIS_PORT: String(redisPort),
      TOOLGATE_HTTP_ALLOW: `127.0.0.1:${targetPort}`,
      TOOLGATE_SANDBOX: SANDBOX,
    };
    upOutput = await npmRun('stack:up', stackEnv);
    apiKey = process.env.TOOLGATE_API_KEY || readDotEnv().TOOLGATE_API_KEY!;
    client = new TrustingClient(readFileSync(CA_FILE));
    token = generateToken(['--id', TENANT]);
  }, 900_000); // an image build on a loaded machine: a deadline, not a wait

  afterAll(async () => {
    await client?.close();
    await new Promise((r) => target?.close(r));
    // This run's project is its own: its volumes (Redis queue, Caddy CA) go with it.
    await npmRun('stack:down', stackEnv, ['--volumes']);
    rmSync(CA_FILE, { force: true });
  }, 120_000);

  /** Every JSON-RPC request the gateway has counted on POST /, whatever its outcome. */
  async function gatewayRequests(): Promise<number> {
    const body = await (await undiciFetch(metricsUrl)).text();
    return body
      .split('\n')
      .filter((line) => line.startsWith('toolgate_http_requests_total'))
      .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
  }

  const rpc = (method: string, params: unknown, headers: Record<string, string>) =>
    client.fetch(site, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }),
    });

  test('stack:up printed the HTTPS URL and the CA it wrote', () => {
    expect(upOutput).toContain(site);
    expect(upOutput).toContain(CA_FILE);
    expect(readFileSync(CA_FILE, 'utf8')).toMatch(/^-----BEGIN CERTIFICATE-----/);
  });

  test('no or a wrong API key: 401 with a JSON-RPC error from Caddy; the gateway never sees it', async () => {
    const before = await gatewayRequests();
    const attempts: Array<Record<string, string>> = [
      { Authorization: `Bearer ${token}` },
      { Authorization: `Bearer ${token}`, 'X-API-Key': '' },
      { Authorization: `Bearer ${token}`, 'X-API-Key': `${apiKey}x` },
      { Authorization: `Bearer ${token}`, 'X-API-Key': apiKey.slice(1) },
      { Authorization: `Bearer ${token}`, 'X-API-Key': 'wrong-key_0123456789abcdefghij' },
      { Authorization: `Bearer ${apiKey}` },
    ];
    for (const headers of attempts) {
      const res = await rpc('tools/list', {}, headers);
      expect(res.status).toBe(401);
      const body = (await res.json()) as RpcErrorBody;
      expect(body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32008 } });
      expect(body.error.message).toContain('X-API-Key');
    }
    // A valid key without a token does reach the gateway, which refuses it itself (Bearer).
    const noToken = await rpc('tools/list', {}, { 'X-API-Key': apiKey });
    expect(noToken.status).toBe(401);
    expect(noToken.headers.get('www-authenticate')).toMatch(/^Bearer/);
    await noToken.arrayBuffer();
    expect(await gatewayRequests()).toBe(before + 1);
  });

  test('an oversized body: 413 from Caddy before the gateway sees it', async () => {
    const env = readDotEnv();
    const limit = Number(process.env.TOOLGATE_MAX_MESSAGE_BYTES || env.TOOLGATE_MAX_MESSAGE_BYTES || 8 * 1024 * 1024);
    const before = await gatewayRequests();
    const res = await client.fetch(site, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'X-API-Key': apiKey, Authorization: `Bearer ${token}` },
      body: Buffer.alloc(limit + 1, 32),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32007, data: { limit } } });
    expect(await gatewayRequests()).toBe(before);
  });

  test('a valid key and token: tools/list and tools/call as plain JSON-RPC over HTTPS', async () => {
    const headers = { 'X-API-Key': apiKey, Authorization: `Bearer ${token}` };
    const list = await rpc('tools/list', {}, headers);
    expect(list.status).toBe(200);
    const listed = (await list.json()) as { id: number; result: { tools: Array<{ name: string }> } };
    expect(listed.id).toBe(7);
    expect(listed.result.tools.map((t) => t.name).sort()).toEqual(ALL_TOOLS.map((t) => t.name).sort());

    const call = await rpc('tools/call', { name: 'run_command', arguments: { argv: ['sh', '-c', 'echo hello from the sandbox'] } }, headers);
    expect(call.status).toBe(200);
    expect(await call.json()).toMatchObject({ id: 7, result: { structuredContent: { exitCode: 0, stdout: 'hello from the sandbox\n' } } });

    // A narrower token sees only its tools, and is refused the others by the gateway.
    const reader = generateToken(['--id', TENANT, '--permissions', 'file:read']);
    const narrow = (await (await rpc('tools/list', {}, { ...headers, Authorization: `Bearer ${reader}` })).json()) as typeof listed;
    expect(narrow.result.tools.map((t) => t.name).sort()).toEqual(['read_file', 'read_multiple_files', 'search_text']);
    const refused = await rpc('tools/call', { name: 'run_command', arguments: { argv: ['true'] } }, { ...headers, Authorization: `Bearer ${reader}` });
    expect(await refused.json()).toMatchObject({ id: 7, error: { code: -32003 } });
  });

  describe('the official SDK client over HTTPS', () => {
    let sdk: Client;
    const called = new Set<string>();
    const call = async (name: string, args: Record<string, unknown>): Promise<Result> => {
      called.add(name);
      return (await sdk.callTool({ name, arguments: args })) as Result;
    };

    beforeAll(async () => {
      const transport = new StreamableHTTPClientTransport(new URL(site), {
        requestInit: { headers: { 'X-API-Key': apiKey, Authorization: `Bearer ${token}` } },
        // The SDK's fetch, but trusting Caddy's CA (and nothing else).
        fetch: ((url: string | URL, init?: RequestInit) => undiciFetch(url, { ...(init as object), dispatcher: client.agent })) as unknown as typeof fetch,
      });
      sdk = new Client({ name: 'toolgate-stack-e2e', version: '1.0.0' });
      await sdk.connect(transport);
    }, 30_000);

    afterAll(async () => {
      await sdk?.close();
    });

    test('lists every tool', async () => {
      const { tools } = await sdk.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(ALL_TOOLS.map((t) => t.name).sort());
    });

    test('files: every file tool in the tenant workspace', async () => {
      const dir = `e2e-${Date.now()}`;
      expect((await call('create_directory', { path: dir })).isError).toBeFalsy();
      expect((await call('write_file', { path: `${dir}/a.txt`, content: 'one\ntwo\nthree\n' })).isError).toBeFalsy();
      expect(text(await call('read_file', { path: `${dir}/a.txt` }))).toBe('one\ntwo\nthree\n');
      expect(text(await call('edit_file', { path: `${dir}/a.txt`, edits: [{ oldText: 'two', newText: 'TWO' }] }))).toMatch(/-two[\s\S]*\+TWO/);
      expect(text(await call('read_multiple_files', { paths: [`${dir}/a.txt`, `${dir}/missing.txt`] }))).toMatch(/TWO[\s\S]*missing|missing[\s\S]*TWO/);
      expect(text(await call('list_directory', { path: dir }))).toMatch(/a\.txt/);
      expect(text(await call('directory_tree', { path: dir }))).toMatch(/a\.txt/);
      expect(text(await call('search_files', { path: dir, pattern: '**/*.txt' }))).toMatch(/a\.txt/);
      expect(text(await call('search_text', { path: dir, query: 'TWO' }))).toMatch(/a\.txt/);
      expect((await call('get_file_info', { path: `${dir}/a.txt` })).structuredContent).toMatchObject({ size: 14 });
      expect((await call('move_path', { source: `${dir}/a.txt`, destination: `${dir}/b.txt` })).isError).toBeFalsy();
      expect((await call('delete_path', { path: dir, recursive: true })).isError).toBeFalsy();
      const gone = await call('get_file_info', { path: dir });
      expect(gone.isError).toBe(true);
      // Nothing outside the workspace, even when asked.
      const escape = await call('read_file', { path: '../../../../etc/hostname' });
      expect(escape.isError).toBe(true);
    });

    test('commands: run, and a long-running process driven by handle', async () => {
      const run = await call('run_command', { argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'] });
      expect(run.structuredContent).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n' });
      const started = await call('start_process', { command: 'cat' });
      const handle = String(started.structuredContent?.handle);
      expect(text(await call('list_processes', {}))).toContain(handle);
      await call('write_process_input', { handle, input: 'ping\n' });
      const out = await call('read_process_output', { handle, offset: 0, wait_ms: 5000 });
      expect(String(out.structuredContent?.data)).toContain('ping');
      expect((await call('kill_process', { handle })).isError).toBeFalsy();
    });

    if (SANDBOX === 'docker') {
      test("commands run in the tenant's docker sandbox: unprivileged, no network but loopback", async () => {
        const r = await call('run_command', { argv: ['sh', '-c', 'id -u; ls /sys/class/net; test -w / && echo root-writable || echo root-read-only'] });
        expect(r.structuredContent).toMatchObject({ exitCode: 0 });
        const uid = process.env.TOOLGATE_SANDBOX_UID?.trim() || '65534';
        expect(String(r.structuredContent?.stdout).split('\n')).toEqual([uid, 'lo', 'root-read-only', '']);
      });

      test("the tenant's workspace is its own quota-sized filesystem: fallocate past it fails", async () => {
        const r = await call('run_command', { argv: ['sh', '-c', 'df -B1 --output=size . | tail -1; fallocate -l 2G big 2>&1; echo "rc=$?"'] });
        const [size, ...rest] = String(r.structuredContent?.stdout).trim().split('\n');
        expect(Number(size)).toBeLessThanOrEqual(1024 ** 3); // the 1 GiB default, not the host's disk
        expect(rest.join('\n')).toMatch(/No space left on device[\s\S]*rc=1/);
      });
    }

    test('a long command: progress events arrive through Caddy while it still runs, not all at its end', async () => {
      called.add('run_command');
      const seen: Array<{ at: number; message?: string }> = [];
      const started = Date.now();
      const result = (await sdk.callTool(
        { name: 'run_command', arguments: { command: 'for i in 1 2 3 4 5 6 7; do echo "tick $i"; sleep 1; done' } },
        undefined,
        {
          timeout: 4000,
          resetTimeoutOnProgress: true,
          onprogress: (p) => seen.push({ at: Date.now(), ...(p.message !== undefined ? { message: p.message } : {}) }),
        },
      )) as Result;
      const ended = Date.now();
      expect(result.structuredContent).toMatchObject({ exitCode: 0, stdout: expect.stringContaining('tick 7') });
      expect(seen.length).toBeGreaterThanOrEqual(2);
      // The first event came seconds before the answer: Caddy passed it on as it was written.
      expect(ended - seen[0]!.at).toBeGreaterThan(2500);
      expect(seen.some((s) => /tick \d/.test(s.message ?? ''))).toBe(true);
      expect(seen[0]!.at - started).toBeLessThan(5000);
    }, 30_000);

    test('the SDK 2.x client pinned to 2026-07-28 works through Caddy too (modern headers pass the proxy)', async () => {
      const { Client: ModernClient, StreamableHTTPClientTransport: ModernTransport } = await import('@modelcontextprotocol/client');
      const modern = new ModernClient({ name: 'toolgate-stack-e2e-modern', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
      await modern.connect(
        new ModernTransport(new URL(site), {
          requestInit: { headers: { 'X-API-Key': apiKey, Authorization: `Bearer ${token}` } },
          fetch: ((url: string | URL, init?: RequestInit) => undiciFetch(url, { ...(init as object), dispatcher: client.agent })) as unknown as typeof fetch,
        }),
      );
      try {
        expect(modern.getProtocolEra()).toBe('modern');
        expect((await modern.listTools()).tools.length).toBe(ALL_TOOLS.length);
        const r = (await modern.callTool({ name: 'run_command', arguments: { command: 'echo modern' } })) as Result;
        expect(r.structuredContent).toMatchObject({ stdout: 'modern\n' });
      } finally {
        await modern.close();
      }
    }, 30_000);

    test('http: http_request from the executor, to an allow-listed address only', async () => {
      const ok = await call('http_request', { url: `http://127.0.0.1:${targetPort}/hello`, method: 'POST', body: 'x' });
      expect(ok.structuredContent).toMatchObject({ status: 200 });
      // The API key stopped at Caddy: nothing of it travels further.
      expect(JSON.parse(String(ok.structuredContent?.body))).toEqual({ method: 'POST', url: '/hello', apiKey: null });
      const refused = await call('http_request', { url: `http://127.0.0.1:${targetPort + 1 === 65536 ? 1 : targetPort + 1}/` });
      expect(refused.isError).toBe(true);
    });

    test('called every tool', () => {
      expect([...called].sort()).toEqual(ALL_TOOLS.map((t) => t.name).sort());
    });
  });

  describe("toolgate shim through Caddy, under the SDK's stdio client", () => {
    function shim(key: string): { client: Client; transport: StdioClientTransport } {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [BIN, 'shim', '--url', site, '--ca', CA_FILE],
        env: { ...getDefaultEnvironment(), TOOLGATE_TOKEN: token, TOOLGATE_API_KEY: key, TOOLGATE_LOG_LEVEL: 'warn' },
        stderr: 'ignore',
      });
      return { client: new Client({ name: 'toolgate-stack-shim', version: '1.0.0' }), transport };
    }

    test('lists and calls tools', async () => {
      const { client: c, transport } = shim(apiKey);
      await c.connect(transport);
      try {
        const { tools } = await c.listTools();
        expect(tools.length).toBe(ALL_TOOLS.length);
        const r = (await c.callTool({ name: 'run_command', arguments: { argv: ['echo', 'via the shim'] } })) as Result;
        expect(r.structuredContent).toMatchObject({ exitCode: 0, stdout: 'via the shim\n' });
      } finally {
        await c.close();
      }
    }, 30_000);

    test("with a wrong API key every request gets Caddy's -32008, and the gateway sees none", async () => {
      const before = await gatewayRequests();
      const { client: c, transport } = shim('wrong-key_0123456789abcdefghij');
      const failure = await c.connect(transport).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(failure).toBeInstanceOf(McpError);
      expect((failure as McpError).code).toBe(-32008);
      await c.close();
      expect(await gatewayRequests()).toBe(before);
    }, 30_000);
  });
});
