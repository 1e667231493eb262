import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureSecretFile, resolveSecret, SecretFileError, secretFilePath } from '../../shared/auth/secret';
import { SECRET_FILE_NAME } from '../../shared/config';

const DIST_SECRET = path.resolve(__dirname, '../../dist/shared/auth/secret.js');
let tmp: string;

beforeEach(async () => {
  tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'toolgate-secret-'));
});
afterEach(async () => {
  await fsp.rm(tmp, { recursive: true, force: true });
});

const BASE64URL_32_BYTES = /^[A-Za-z0-9_-]{43}$/;

describe('resolveSecret', () => {
  it('prefers the configured secret (TOOLGATE_JWT_SECRET) over the file', async () => {
    await fsp.writeFile(path.join(tmp, SECRET_FILE_NAME), 'from-file');
    expect(resolveSecret({ jwtSecret: 'from-env', dataDir: tmp })).toBe('from-env');
  });

  it('reads the data directory secret file, trimmed', async () => {
    await fsp.writeFile(path.join(tmp, SECRET_FILE_NAME), '  from-file\n');
    expect(resolveSecret({ jwtSecret: undefined, dataDir: tmp })).toBe('from-file');
  });

  it('is undefined when neither exists, and creates nothing', async () => {
    const dataDir = path.join(tmp, 'absent');
    expect(resolveSecret({ jwtSecret: undefined, dataDir })).toBeUndefined();
    await expect(fsp.stat(dataDir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('names the file when it is empty or unreadable', async () => {
    await fsp.writeFile(path.join(tmp, SECRET_FILE_NAME), ' \n');
    expect(() => resolveSecret({ jwtSecret: undefined, dataDir: tmp })).toThrow(SecretFileError);
    expect(() => resolveSecret({ jwtSecret: undefined, dataDir: tmp })).toThrow(/is empty/);
    await fsp.rm(path.join(tmp, SECRET_FILE_NAME));
    await fsp.mkdir(path.join(tmp, SECRET_FILE_NAME));
    expect(() => resolveSecret({ jwtSecret: undefined, dataDir: tmp })).toThrow(new RegExp(`cannot read .*${SECRET_FILE_NAME}: EISDIR`));
  });
});

describe('ensureSecretFile', () => {
  it('creates the data directory and a private 32-byte base64url secret on first start', async () => {
    const dataDir = path.join(tmp, 'nested', 'data');
    const first = await ensureSecretFile(dataDir);
    expect(first.created).toBe(true);
    expect(first.secret).toMatch(BASE64URL_32_BYTES);
    expect(Buffer.from(first.secret, 'base64url')).toHaveLength(32);
    const stat = await fsp.stat(secretFilePath(dataDir));
    expect(stat.mode & 0o777).toBe(0o600);
    expect((await fsp.stat(dataDir)).mode & 0o777).toBe(0o700);
    expect(resolveSecret({ jwtSecret: undefined, dataDir })).toBe(first.secret);
    expect(await fsp.readdir(dataDir)).toEqual([SECRET_FILE_NAME]);
  });

  it('keeps the existing secret on later starts', async () => {
    const first = await ensureSecretFile(tmp);
    const second = await ensureSecretFile(tmp);
    expect(second).toEqual({ secret: first.secret, created: false });
  });

  it('keeps a secret the operator wrote', async () => {
    await fsp.writeFile(path.join(tmp, SECRET_FILE_NAME), 'operator-chosen\n');
    expect(await ensureSecretFile(tmp)).toEqual({ secret: 'operator-chosen', created: false });
  });

  it('refuses to replace an empty secret file', async () => {
    await fsp.writeFile(path.join(tmp, SECRET_FILE_NAME), '');
    await expect(ensureSecretFile(tmp)).rejects.toThrow(SecretFileError);
    expect(await fsp.readFile(path.join(tmp, SECRET_FILE_NAME), 'utf8')).toBe('');
  });

  it('gives every concurrent start the same secret and creates it once', async () => {
    const results = await Promise.all(Array.from({ length: 12 }, () => ensureSecretFile(tmp)));
    expect(new Set(results.map((r) => r.secret)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(await fsp.readdir(tmp)).toEqual([SECRET_FILE_NAME]);
  });

  it('gives concurrent server processes the same secret (built module)', async () => {
    const runOne = () =>
      new Promise<{ secret: string; created: boolean }>((resolve, reject) => {
        const script = `require(${JSON.stringify(DIST_SECRET)}).ensureSecretFile(${JSON.stringify(tmp)}).then((r) => process.stdout.write(JSON.stringify(r)))`;
        const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
        child.on('error', reject);
        child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`exit ${code}`))));
      });
    const results = await Promise.all(Array.from({ length: 6 }, runOne));
    expect(new Set(results.map((r) => r.secret)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(resolveSecret({ jwtSecret: undefined, dataDir: tmp })).toBe(results[0]!.secret);
    expect(await fsp.readdir(tmp)).toEqual([SECRET_FILE_NAME]);
  });
});
