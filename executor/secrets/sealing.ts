/**
 * The secret store's encryption: AES-256-GCM (node:crypto) with a 32-byte key from
 * TOOLGATE_SECRETS_KEY, a fresh 12-byte nonce per value, and the record's identity as associated
 * data (tenant, name, host rules, header template): a sealed value copied to another tenant or
 * name, or whose host rules were edited in the store, no longer opens. A known text sealed with
 * the key (the "key check") tells a wrong key apart from a damaged record.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { SecretsUnavailable } from '../../shared/secrets/broker';

/** A value as stored: base64 nonce, ciphertext and tag. */
export interface Sealed {
  readonly iv: string;
  readonly data: string;
  readonly tag: string;
}

export const KEY_HINT = '32 random bytes as hex (64 characters) or base64 (44 characters), e.g. `openssl rand -hex 32`';

/** Parses a key as given (hex or base64); throws SecretsUnavailable naming the variable. */
export function parseKey(text: string | undefined, variable = 'TOOLGATE_SECRETS_KEY'): Buffer {
  if (text === undefined || text === '') throw new SecretsUnavailable(`secrets are off: ${variable} is not set (${KEY_HINT})`);
  let key: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(text)) key = Buffer.from(text, 'hex');
  else if (/^[A-Za-z0-9+/]{43}=$/.test(text) || /^[A-Za-z0-9_-]{43}$/.test(text)) key = Buffer.from(text, /[_-]/.test(text) ? 'base64url' : 'base64');
  if (key?.length !== 32) throw new SecretsUnavailable(`secrets are refused: ${variable} is not a valid key (it must be ${KEY_HINT})`);
  return key;
}

export function seal(key: Buffer, plain: string, aad: string): Sealed {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return { iv: iv.toString('base64'), data: data.toString('base64'), tag: cipher.getAuthTag().toString('base64') };
}

/** The plain text, or undefined when the key (or the associated data) is not the one it was sealed with. */
export function unseal(key: Buffer, sealed: Sealed, aad: string): string | undefined {
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.iv, 'base64'));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}

const CHECK_TEXT = 'toolgate secret store key check';
const CHECK_AAD = 'toolgate-secrets-key-check';

export const sealCheck = (key: Buffer): Sealed => seal(key, CHECK_TEXT, CHECK_AAD);
export const opensCheck = (key: Buffer, check: Sealed): boolean => unseal(key, check, CHECK_AAD) === CHECK_TEXT;

/** The associated data that binds a sealed value to its record. */
export function recordAad(tenant: string, name: string, host: string, header: string | undefined): string {
  return JSON.stringify(['toolgate-secret', tenant, name, host, header ?? '']);
}

export function isSealed(value: unknown): value is Sealed {
  const v = value as Partial<Sealed> | null;
  return typeof v?.iv === 'string' && typeof v.data === 'string' && typeof v.tag === 'string';
}
