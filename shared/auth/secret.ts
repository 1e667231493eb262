/**
 * The token signing secret. Where it comes from (spec §5: "the secret from the service
 * configuration"): TOOLGATE_JWT_SECRET if set, else the secret file in the data directory, which
 * only `toolgate serve` creates (`ensureSecretFile`) on its first start. `generate-token` only
 * reads (`resolveSecret`): a generator that invented a secret would sign tokens no server accepts.
 */
import { randomBytes } from 'node:crypto';
import { promises as fsp, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Config, SECRET_FILE_NAME } from '../config';

export class SecretFileError extends Error {
  override readonly name = 'SecretFileError';
}

/** 32 random bytes: the HMAC-SHA256 key size RFC 7518 §3.2 asks for. */
export const SECRET_BYTES = 32;

export const secretFilePath = (dataDir: string): string => path.join(dataDir, SECRET_FILE_NAME);

const errorCode = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | undefined)?.code;

/** The file's secret, trimmed (operators may write it with a trailing newline). Empty is an error. */
function parseSecretFile(file: string, content: string): string {
  const secret = content.trim();
  if (secret.length === 0) {
    throw new SecretFileError(`the secret file ${file} is empty; delete it (toolgate serve creates a new one) or set TOOLGATE_JWT_SECRET`);
  }
  return secret;
}

function unreadable(file: string, err: unknown): SecretFileError {
  return new SecretFileError(`cannot read the secret file ${file}: ${errorCode(err) ?? (err instanceof Error ? err.message : String(err))}`);
}

/**
 * The configured secret: `config.jwtSecret`, else the data directory's secret file, else
 * undefined. An empty or unreadable file is an error, not "no secret": it names the file.
 */
export function resolveSecret(config: Pick<Config, 'jwtSecret' | 'dataDir'>): string | undefined {
  if (config.jwtSecret !== undefined) return config.jwtSecret;
  const file = secretFilePath(config.dataDir);
  let content: string;
  try {
    content = readFileSync(file, 'utf8');
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return undefined;
    throw unreadable(file, err);
  }
  return parseSecretFile(file, content);
}

async function readExisting(file: string): Promise<string | undefined> {
  try {
    return parseSecretFile(file, await fsp.readFile(file, 'utf8'));
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return undefined;
    throw err instanceof SecretFileError ? err : unreadable(file, err);
  }
}

/**
 * For `toolgate serve`: returns the data directory's secret, creating the directory (0700) and a
 * random base64url secret file (0600) if there is none. The file is written in full to a private
 * temporary name and then hard-linked into place: link(2) fails with EEXIST rather than replacing,
 * so when two servers start at once exactly one secret wins, both return it, and no reader ever
 * sees a half-written file.
 */
export async function ensureSecretFile(dataDir: string): Promise<{ secret: string; created: boolean }> {
  await fsp.mkdir(dataDir, { recursive: true, mode: 0o700 });
  const file = secretFilePath(dataDir);
  const existing = await readExisting(file);
  if (existing !== undefined) return { secret: existing, created: false };

  const secret = randomBytes(SECRET_BYTES).toString('base64url');
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    const handle = await fsp.open(tmp, 'wx', 0o600);
    try {
      await handle.writeFile(secret + '\n');
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await fsp.link(tmp, file);
    } catch (err) {
      if (errorCode(err) !== 'EEXIST') throw err;
      const winner = await readExisting(file);
      if (winner === undefined) throw new SecretFileError(`the secret file ${file} vanished while it was being created`);
      return { secret: winner, created: false };
    }
    await syncDirectory(dataDir);
    return { secret, created: true };
  } finally {
    await fsp.rm(tmp, { force: true });
  }
}

/** Makes the new directory entry durable, so a crash cannot lose a secret tokens were signed with. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await fsp.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
