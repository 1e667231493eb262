/**
 * HTTPS to a gateway whose certificate comes from a private CA (as with Caddy's `tls internal`):
 * trusted with `--ca FILE`, refused without it. The CA and the 127.0.0.1 certificate are made
 * with openssl for each run.
 */
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ErrorCode } from '../../shared/protocol/errors';
import { describeIf, hasCommand } from '../helpers/availability';
import { TestGateway } from './gateway';
import { API_KEY, ShimProcess, TOKEN } from './shim-process';

interface Pki {
  dir: string;
  caCert: string;
  otherCaCert: string;
  key: string;
  cert: string;
}

/** A CA, a second unrelated CA, and a server certificate for IP 127.0.0.1 signed by the first. */
async function makePki(): Promise<Pki> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'toolgate-shim-tls-'));
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  for (const name of ['ca', 'other-ca']) {
    run(
      'req',
      '-x509',
      ...ec,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-subj',
      `/CN=toolgate test ${name}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    );
  }
  run('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  await fs.writeFile(
    path.join(dir, 'server.ext'),
    'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n',
  );
  run(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.crt',
    '-days',
    '2',
    '-extfile',
    'server.ext',
  );
  const read = (f: string) => fs.readFile(path.join(dir, f), 'utf8');
  return { dir, caCert: path.join(dir, 'ca.crt'), otherCaCert: path.join(dir, 'other-ca.crt'), key: await read('server.key'), cert: await read('server.crt') };
}

describeIf(hasCommand('openssl'), 'openssl is not installed, so no test certificates can be made', 'shim over HTTPS with a private CA', () => {
  let pki: Pki;
  let gateway: TestGateway;
  let shim: ShimProcess | undefined;

  beforeAll(async () => {
    pki = await makePki();
    gateway = await TestGateway.start({ tls: { key: pki.key, cert: pki.cert } });
  });
  afterEach(async () => {
    await shim?.close();
    shim = undefined;
  });
  afterAll(async () => {
    await gateway?.stop();
    if (pki) await fs.rm(pki.dir, { recursive: true, force: true });
  });

  test('--ca FILE: the certificate is trusted and the request goes through with its credentials', async () => {
    shim = await ShimProcess.start(gateway.url, { args: ['--ca', pki.caCert] });
    await shim.send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(await shim.reply(1)).toEqual({ jsonrpc: '2.0', id: 1, result: { method: 'tools/list', params: null } });
    const seen = gateway.seen.at(-1)!;
    expect(seen.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(seen.headers['x-api-key']).toBe(API_KEY);
  });

  test('without --ca the private certificate is refused: -32006 that says how to trust it', async () => {
    shim = await ShimProcess.start(gateway.url);
    await shim.send({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const reply = await shim.reply(1);
    expect(reply.error?.code).toBe(ErrorCode.Unavailable);
    expect(reply.error?.message).toContain(`TLS with the gateway at ${gateway.url} failed`);
    expect(reply.error?.message).toContain('--ca FILE');
  });

  test('--ca with another CA: refused too (the given CA replaces the system roots, it does not widen them)', async () => {
    shim = await ShimProcess.start(gateway.url, { args: ['--ca', pki.otherCaCert] });
    await shim.send({ jsonrpc: '2.0', id: 1, method: 'ping' });
    expect((await shim.reply(1)).error?.code).toBe(ErrorCode.Unavailable);
  });
});
