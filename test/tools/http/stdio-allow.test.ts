/**
 * TOOLGATE_HTTP_ALLOW through the real `toolgate stdio` binary (dist/, built by
 * `npx tsc -p tsconfig.build.json`): the allow-list is read at start-up, opens exactly its
 * entries, and a malformed entry stops start-up with a sentence naming it. TOOLGATE_EGRESS_CA_FILE
 * too: its CA is trusted for https (besides NODE_EXTRA_CA_CERTS'), and a file without a
 * certificate stops start-up.
 */
import { spawn } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Origins, startOrigins } from '../../secrets/origins';
import { httpServer, TestServer, Tripwire, tripwire } from './loopback';

const BIN = path.resolve(__dirname, '../../../dist/bin/toolgate.js');

interface Run {
  replies: Map<number, { result?: { isError?: boolean; content: Array<{ text: string }>; structuredContent?: Record<string, unknown> } }>;
  code: number | null;
  stderr: string;
}

/** Starts the binary, sends `messages` one per line, waits for the replies to every id, then closes stdin. */
async function runStdio(allow: string, messages: object[], root: string, more: Record<string, string> = {}): Promise<Run> {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build first with \`npx tsc -p tsconfig.build.json\``);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('TOOLGATE_')) env[k] = v;
  const child = spawn(process.execPath, [BIN, 'stdio', '--root', root], {
    env: { ...env, TOOLGATE_HTTP_ALLOW: allow, TOOLGATE_SANDBOX: 'none', TOOLGATE_LOG_LEVEL: 'error', ...more },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const run: Run = { replies: new Map(), code: null, stderr: '' };
  const wanted = messages.filter((m) => 'id' in m).length;
  let buffered = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (run.stderr += d));
  child.stdin.on('error', () => undefined);
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    const lines = (buffered + d).split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      const msg = JSON.parse(line) as { id: number };
      run.replies.set(msg.id, msg as never);
    }
    if (run.replies.size >= wanted) child.stdin.end();
  });
  for (const m of messages) child.stdin.write(JSON.stringify(m) + '\n');
  run.code = await new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return run;
}

const call = (id: number, url: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'http_request', arguments: { url } } });
const INIT = [
  { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } },
  { jsonrpc: '2.0', method: 'notifications/initialized' },
];

let server: TestServer;
let wire: Tripwire;
let root: string;
let origins: Origins;
let caDir: string;

beforeAll(async () => {
  server = await httpServer((_req, res) => res.end('through stdio'));
  caDir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-https-ca-'));
  origins = await startOrigins(caDir, (_req, res) => res.end('through https'));
  wire = await tripwire('127.0.0.1');
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-http-'));
});
afterAll(async () => {
  await server.close();
  await wire.close();
  await origins.close();
  await fs.rm(root, { recursive: true, force: true });
  await fs.rm(caDir, { recursive: true, force: true });
});

it('toolgate stdio reads TOOLGATE_HTTP_ALLOW: the entry works, everything else on loopback is refused', async () => {
  const run = await runStdio(` 127.0.0.1:${server.port} ,`, [...INIT, call(1, `${server.url}/`), call(2, `http://127.0.0.1:${wire.port}/`)], root);
  expect(run.code).toBe(0);
  const ok = run.replies.get(1)?.result;
  expect(ok?.isError).toBeUndefined();
  expect(ok?.structuredContent).toMatchObject({ status: 200, body: 'through stdio' });
  const refused = run.replies.get(2)?.result;
  expect(refused?.isError).toBe(true);
  expect(refused?.content[0]?.text).toContain('Refused: 127.0.0.1 (loopback) is not allowed');
  expect(wire.connections).toBe(0);
});

it('a malformed TOOLGATE_HTTP_ALLOW entry stops start-up with a sentence naming it', async () => {
  const run = await runStdio('127.0.0.1/32,localhost', [], root);
  expect(run.code).toBe(1);
  expect(run.stderr).toContain('TOOLGATE_HTTP_ALLOW entry "localhost" is not valid');
});

it('toolgate stdio trusts TOOLGATE_EGRESS_CA_FILE for https; without it the certificate is refused', async () => {
  const allow = `localhost:${origins.tlsPort}`;
  const target = `https://localhost:${origins.tlsPort}/`;
  const trusted = await runStdio(allow, [...INIT, call(1, target)], root, { TOOLGATE_EGRESS_CA_FILE: origins.ca.certFile });
  expect(trusted.replies.get(1)?.result?.structuredContent).toMatchObject({ status: 200, body: 'through https' });
  const untrusted = await runStdio(allow, [...INIT, call(1, target)], root);
  expect(untrusted.replies.get(1)?.result?.isError).toBe(true);
  expect(untrusted.replies.get(1)?.result?.content[0]?.text).toContain(`TLS failed with localhost:${origins.tlsPort}`);
});

it('with TOOLGATE_EGRESS_CA_FILE set, a CA given to Node by NODE_EXTRA_CA_CERTS is still trusted', async () => {
  const otherDir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-https-extra-ca-'));
  const extra = await startOrigins(otherDir, (_req, res) => res.end('through the extra CA'));
  try {
    const allow = `localhost:${origins.tlsPort},localhost:${extra.tlsPort}`;
    const run = await runStdio(allow, [...INIT, call(1, `https://localhost:${extra.tlsPort}/`), call(2, `https://localhost:${origins.tlsPort}/`)], root, {
      TOOLGATE_EGRESS_CA_FILE: origins.ca.certFile,
      NODE_EXTRA_CA_CERTS: extra.ca.certFile,
    });
    expect(run.replies.get(1)?.result?.structuredContent).toMatchObject({ status: 200, body: 'through the extra CA' });
    expect(run.replies.get(2)?.result?.structuredContent).toMatchObject({ status: 200, body: 'through https' });
  } finally {
    await extra.close();
    await fs.rm(otherDir, { recursive: true, force: true });
  }
});

it('a TOOLGATE_EGRESS_CA_FILE without a certificate stops start-up with a sentence naming it', async () => {
  const junk = path.join(root, 'junk.pem');
  await fs.writeFile(junk, 'junk\n');
  const run = await runStdio('', [], root, { TOOLGATE_EGRESS_CA_FILE: junk });
  expect(run.code).toBe(1);
  expect(run.stderr).toContain(`TOOLGATE_EGRESS_CA_FILE ${junk} holds no PEM certificate`);
});
