/**
 * http_request over HTTPS to a server on 127.0.0.1 whose certificate comes from its own CA,
 * trusted only through TOOLGATE_EGRESS_CA_FILE (read as the composition root reads it): with it,
 * `{{secret:NAME}}` reaches the server as the real value and the model sees `[secret:NAME]`, and a
 * plain request works; without it, the handshake fails with a certificate error and nothing is sent.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileSecretBackend } from '../../executor/secrets/backends';
import { startSecretService, SecretService } from '../../executor/secrets/service';
import { createSecretStore } from '../../executor/secrets/store';
import { loadConfig } from '../../shared/config';
import { DEFAULT_LIMITS } from '../../shared/limits';
import { createLogger } from '../../shared/log';
import { httpRequest } from '../../shared/tools/http/http-request';
import { createHttpPolicy, readUpstreamCa, upstreamTrust } from '../../shared/tools/http/policy';
import { LocalToolRunner } from '../../shared/tools/local-runner';
import type { AnyTool, ToolResult } from '../../shared/tools/tool';
import { Origins, startOrigins } from './origins';

const KEY = randomBytes(32).toString('hex');
const VALUE = 'tok_' + randomBytes(20).toString('hex');

let dir: string;
let origins: Origins;
let service: SecretService;
let caFile: string;
const seen: IncomingHttpHeaders[] = [];

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-secrets-https-'));
  origins = await startOrigins(dir, (req, res) => {
    seen.push(req.headers);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ authorization: req.headers.authorization ?? null }));
  });
  caFile = origins.ca.certFile;
  await createSecretStore(fileSecretBackend(dir), KEY).set('alice', { name: 'API_TOKEN', host: `api.test:${origins.tlsPort}`, value: VALUE });
  service = await startSecretService({
    config: loadConfig({ TOOLGATE_DATA_DIR: dir, TOOLGATE_SECRETS_KEY: KEY }),
    log: createLogger('silent', 'test', 'json'),
    onUse: () => undefined,
  });
});
afterAll(async () => {
  await service.close();
  await origins.close();
  await fs.rm(dir, { recursive: true, force: true });
});
beforeEach(() => {
  seen.length = 0;
});

/** http_request as `alice`, with the CA file configured (`withCa`) or not. */
async function call(withCa: boolean, args: Record<string, unknown>): Promise<ToolResult> {
  const config = loadConfig({ TOOLGATE_DATA_DIR: dir, ...(withCa && { TOOLGATE_EGRESS_CA_FILE: caFile }) });
  const http = createHttpPolicy([`api.test:${origins.tlsPort}`], {
    resolve: async () => [{ address: '127.0.0.1', family: 4 }],
    upstreamTls: upstreamTrust(await readUpstreamCa(config.egress.caFile)),
  });
  const runner = new LocalToolRunner({
    trusted: { limits: DEFAULT_LIMITS, http, secrets: service.broker },
    onUnexpectedError: (err) => {
      throw err;
    },
  });
  const signal = new AbortController().signal;
  return runner.run(httpRequest as unknown as AnyTool, httpRequest.input.parse(args), { tenant: 'alice', permissions: new Set(['network:http']) }, signal);
}

const url = () => `https://api.test:${origins.tlsPort}/echo`;
const shown = (r: ToolResult) => JSON.stringify(r);

it('with the CA configured, the HTTPS server receives the real value and the model sees [secret:NAME]', async () => {
  const result = await call(true, { url: url(), headers: { Authorization: 'Bearer {{secret:API_TOKEN}}' } });
  expect(result.isError).toBeUndefined();
  expect(seen.map((h) => h.authorization)).toEqual([`Bearer ${VALUE}`]);
  expect(JSON.parse(String(result.structuredContent?.body))).toEqual({ authorization: 'Bearer [secret:API_TOKEN]' });
  expect(shown(result)).not.toContain(VALUE);
});

it('with the CA configured, a plain request to the HTTPS server works', async () => {
  const result = await call(true, { url: url() });
  expect(result.isError).toBeUndefined();
  expect(result.structuredContent).toMatchObject({ status: 200, body: '{"authorization":null}' });
  expect(seen).toHaveLength(1);
});

it('without the CA configured, the request fails with a certificate error and nothing is sent', async () => {
  for (const args of [{ url: url(), headers: { Authorization: 'Bearer {{secret:API_TOKEN}}' } }, { url: url() }]) {
    const result = await call(false, args);
    expect(result.isError).toBe(true);
    expect(shown(result)).toMatch(
      /TLS failed with api\.test:\d+: .*certificate.*\((UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|SELF_SIGNED_CERT_IN_CHAIN)\)/,
    );
    expect(shown(result)).not.toContain(VALUE);
  }
  expect(seen).toEqual([]);
});

it('a CA file that cannot be read or holds no certificate is refused at start-up with a sentence naming it', async () => {
  const junk = path.join(dir, 'junk.pem');
  await fs.writeFile(junk, 'not a certificate\n');
  await expect(readUpstreamCa(junk)).rejects.toThrow(`TOOLGATE_EGRESS_CA_FILE ${junk} holds no PEM certificate`);
  await expect(readUpstreamCa(path.join(dir, 'missing.pem'))).rejects.toThrow(/TOOLGATE_EGRESS_CA_FILE .*missing\.pem could not be read \(ENOENT\)/);
  expect(await readUpstreamCa(undefined)).toEqual([]);
});
